# 作弊：不看 renormalize，k 个权重总是除以它们的和
# 为什么必须判错：题目要求只有 renormalize=True 时才归一化；renormalize=False（config 里 norm_topk_prob = false）时权重是全部专家上的概率，加起来小于 1，归一化之后每个专家的输出都被放大，和 HF 的模型对不上。
# 判词里要有：renormalize=False 时也
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_select = select_experts


def select_experts(router_logits, top_k, renormalize):
    return _select(router_logits, top_k, True)
