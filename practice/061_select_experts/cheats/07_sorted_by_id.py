# 作弊：选出的 k 个专家按编号从小到大排，权重跟着编号
# 为什么必须判错：题目要求和 torch.topk 一样按权重从大到小排；每一对 (权重, 编号) 虽然都对得上，第 j 列却不再是第 j 大的专家，和 HF 的路由逐列比较对不上（只取第一列当“最想去的专家”的代码也会取错）。
# 判词里要有：按专家编号排了
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_select = select_experts


def select_experts(router_logits, top_k, renormalize):
    weights, ids = _select(router_logits, top_k, renormalize)
    ids, order = ids.sort(dim=-1)
    return weights.gather(1, order), ids
