# 作弊：local_ids 里本 rank 第一个专家的编号写成 rank * ep_size
# 为什么必须判错：题目规定 rank r 放专家 [r·E/ep_size, (r+1)·E/ep_size)，第一个是 r·(E/ep_size)；只有 E = ep_size² 时两者碰巧相等，别的情况下 rank > 0 的专家全都对错了号。
# 判词里要有：rank·(E/ep_size)
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def local_ids(topk_ids, rank, ep_size, num_experts):
    if ep_size < 1 or num_experts % ep_size != 0 or not 0 <= rank < ep_size:
        raise ValueError("坏参数")
    per = num_experts // ep_size
    local = topk_ids - rank * ep_size
    return torch.where((local >= 0) & (local < per), local, -1)
