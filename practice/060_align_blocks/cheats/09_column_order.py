# 作弊：先按 j、再按 m 走格子，同一个专家的格子没按编号升序
# 为什么必须判错：题目要求同一专家内格子编号从小到大：sorted_ids 只有这一种排法是对的，和 GPU 版的稳定排序逐位一致；按列走时，一个专家既在第 0 列又在第 1 列出现，编号就乱了。
# 判词里要有：先按 j、再按 m
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = align_blocks


def align_blocks(topk_ids, block_size, num_experts):
    _checked(topk_ids, block_size, num_experts)
    M, k = len(topk_ids), len(topk_ids[0])
    pairs = M * k
    buckets = [[] for _ in range(num_experts)]
    for j in range(k):
        for m in range(M):
            e = topk_ids[m][j]
            if e >= 0:
                buckets[e].append(m * k + j)
    sorted_ids, expert_ids = [], []
    for e, mine in enumerate(buckets):
        blocks = (len(mine) + block_size - 1) // block_size
        sorted_ids += mine + [pairs] * (blocks * block_size - len(mine))
        expert_ids += [e] * blocks
    used = len(sorted_ids)
    capacity = padded_capacity(pairs, num_experts, block_size)
    sorted_ids += [pairs] * (capacity - used)
    expert_ids += [-1] * (capacity // block_size - len(expert_ids))
    return sorted_ids, expert_ids, used
