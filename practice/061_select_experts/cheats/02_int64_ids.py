# 作弊：专家编号直接返回 torch.topk 给的 int64
# 为什么必须判错：题目要求 topk_ids 是 int32：第 20 章的 moe_align_block_size 和融合的 MoE 算子按 int32 读编号，int64 的张量交给它们，每个编号被读成两个数。
# 判词里要有：int32
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def select_experts(router_logits, top_k, renormalize):
    if router_logits.dim() != 2 or not router_logits.is_floating_point() or router_logits.numel() == 0:
        raise ValueError("router_logits")
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= router_logits.shape[1]:
        raise ValueError("top_k")
    weights, ids = torch.topk(torch.softmax(router_logits, dim=-1, dtype=torch.float32), top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids
