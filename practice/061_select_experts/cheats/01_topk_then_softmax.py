# 作弊：先取 logits 最大的 k 个，只对这 k 个做 softmax（不管 renormalize 是什么）
# 为什么必须判错：题目要求 softmax 做在全部 E 个专家上；renormalize=False 时权重是全部专家上的概率，k 个加起来小于 1（Qwen2-MoE 这类 norm_topk_prob = false 的模型就这样用），只在 k 个里做 softmax 等于偷偷归一化了，每个专家的输出都被放大。
# 判词里要有：先取 logits 最大的 k 个
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_select = select_experts


def select_experts(router_logits, top_k, renormalize):
    _select(router_logits, top_k, renormalize)  # 只借它查参数
    values, ids = torch.topk(router_logits.float(), top_k, dim=-1)
    return torch.softmax(values, dim=-1), ids.to(torch.int32)
