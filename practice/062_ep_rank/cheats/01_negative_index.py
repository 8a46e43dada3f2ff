# 作弊：rank_output 对 local_topk_ids 里出现的每个编号都算一遍，-1 也不例外：w1_local[-1] 取到的是本地最后一个专家
# 为什么必须判错：题目要求 -1 的格子跳过（专家不在这个 rank 上，由别的 rank 算）；Python / torch 的负下标让 w1_local[-1] 不报错地取到本地最后一个专家，这些格子的权重乘上了错的专家的输出，all_reduce 之后那几行多出一份，而且没有任何异常提醒。
# 判词里要有：-1
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def rank_output(x, w1_local, w2_local, topk_weights, local_topk_ids):
    out = torch.zeros_like(x)
    inter = w2_local.shape[2]
    for e in torch.unique(local_topk_ids).tolist():
        token, slot = torch.where(local_topk_ids == e)
        h = x[token] @ w1_local[e].T
        y = (F.silu(h[:, :inter]) * h[:, inter:]) @ w2_local[e].T
        out.index_add_(0, token, y * topk_weights[token, slot, None])
    return out
