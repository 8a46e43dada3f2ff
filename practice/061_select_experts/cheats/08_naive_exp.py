# 作弊：softmax 自己写成 exp(x) / sum(exp(x))，不减去每行的最大值
# 为什么必须判错：题目要求在 float32 里算出全部专家上的概率；logits 超过 88.7 时 exp 在 float32 里溢出成 inf，inf / inf 是 nan，这个 token 的 MoE 输出整个变成 nan。
# 判词里要有：溢出
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_select = select_experts


def select_experts(router_logits, top_k, renormalize):
    _select(router_logits, top_k, renormalize)  # 只借它查参数
    e = router_logits.float().exp()
    weights, ids = torch.topk(e / e.sum(dim=-1, keepdim=True), top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids.to(torch.int32)
