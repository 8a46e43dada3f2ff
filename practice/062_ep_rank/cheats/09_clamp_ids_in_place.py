# 作弊：rank_output 先记下哪些格子有效，再原地把 local_topk_ids 的 -1 改成 0（clamp_），稠密地算完乘上掩码
# 为什么必须判错：题目要求不改动传进来的张量；local_topk_ids 是调用者的，原地改掉 -1 之后，同一份编号再交给别的地方用（比如再算一遍、或者下一层共用），-1 就变成了本地第 0 个专家。
# 判词里要有：改动
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def rank_output(x, w1_local, w2_local, topk_weights, local_topk_ids):
    valid = local_topk_ids >= 0
    ids = local_topk_ids.clamp_(min=0).long()
    inter = w2_local.shape[2]
    h = torch.einsum("mh,mkih->mki", x, w1_local[ids])
    y = torch.einsum("mki,mkhi->mkh", F.silu(h[..., :inter]) * h[..., inter:], w2_local[ids])
    return (y * (topk_weights * valid)[..., None]).sum(dim=1)
