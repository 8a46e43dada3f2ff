# 作弊：乘的权重按专家编号取列：topk_weights[token, e]，而不是选中它的那一格 topk_weights[token, slot]
# 为什么必须判错：题目要求第 m 行加的是 topk_weights[m, j] · 专家(x_m)，j 是选中这个专家的格子；topk_weights 的列是 k 个格子，不是专家，按专家编号取列，权重就和专家对不上了（编号大于等于 k 时还会越界）。
# 判词里要有：格
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def rank_output(x, w1_local, w2_local, topk_weights, local_topk_ids):
    out = torch.zeros_like(x)
    inter = w2_local.shape[2]
    for e in range(w1_local.shape[0]):
        token, slot = torch.where(local_topk_ids == e)
        if token.numel() == 0:
            continue
        h = x[token] @ w1_local[e].T
        y = (F.silu(h[:, :inter]) * h[:, inter:]) @ w2_local[e].T
        out.index_add_(0, token, y * topk_weights[token, e, None])
    return out
