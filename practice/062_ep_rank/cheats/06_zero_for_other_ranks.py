# 作弊：local_ids 把不在本 rank 上的格子标成 0，rank_output 就不用管 -1 了
# 为什么必须判错：题目要求不在本 rank 上的格子标 -1；0 是本地第 0 个专家，这些格子的权重会乘上本地第 0 个专家的输出，每个 rank 都多算一份，加起来就错了。
# 判词里要有：-1
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def local_ids(topk_ids, rank, ep_size, num_experts):
    if ep_size < 1 or num_experts % ep_size != 0 or not 0 <= rank < ep_size:
        raise ValueError("坏参数")
    per = num_experts // ep_size
    local = topk_ids - rank * per
    return torch.where((local >= 0) & (local < per), local, 0)
