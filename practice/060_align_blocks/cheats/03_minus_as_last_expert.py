# 作弊：不管 -1 的规则，直接 buckets[e].append(...)：e = -1 时 Python 不报错，格子落进了最后一个专家的桶
# 为什么必须判错：题目规定 -1 表示这个格子的专家在别的 rank 上，本 rank 跳过它。算进最后一个专家，本 rank 就用它的权重多算了不属于自己的 token，专家并行汇总时这些 token 被算了两遍。只要输入里有 -1 就错。
# 判词里要有：buckets[-1]
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = align_blocks


def align_blocks(topk_ids, block_size, num_experts):
    _checked(topk_ids, block_size, num_experts)
    k = len(topk_ids[0])
    pairs = len(topk_ids) * k
    buckets = [[] for _ in range(num_experts)]
    for m, row in enumerate(topk_ids):
        for j, e in enumerate(row):
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
