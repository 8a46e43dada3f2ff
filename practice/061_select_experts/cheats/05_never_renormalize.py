# 作弊：不看 renormalize，k 个权重从不归一化
# 为什么必须判错：题目要求 renormalize=True 时把 k 个权重除以它们的和（Qwen3-MoE、Mixtral 都这样）；不除，k 个专家的输出加权后总量小于 1，每一层 MoE 的输出都偏小。
# 判词里要有：没有把 k 个权重除以它们的和
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_select = select_experts


def select_experts(router_logits, top_k, renormalize):
    return _select(router_logits, top_k, False)
