# 作弊：local_ids 把不在本 rank 上的标 -1，本 rank 上的却保留全局编号（没减去第一个专家的编号）
# 为什么必须判错：题目要求本地编号 = 全局编号 - rank·E/ep_size：w1_local 只有 E/ep_size 个专家，rank > 0 时拿全局编号去取本地权重，不是越界就是取到别的专家。
# 判词里要有：全局编号
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def local_ids(topk_ids, rank, ep_size, num_experts):
    if ep_size < 1 or num_experts % ep_size != 0 or not 0 <= rank < ep_size:
        raise ValueError("坏参数")
    per = num_experts // ep_size
    mine = (topk_ids >= rank * per) & (topk_ids < (rank + 1) * per)
    return torch.where(mine, topk_ids, -1)
