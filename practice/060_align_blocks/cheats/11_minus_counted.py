# 作弊：-1 的格子放进排在最后的一个“别的 rank”桶里，也补齐、也算进 num_tokens_post_padded
# 为什么必须判错：题目要求 -1 的格子跳过：它们不是本 rank 要算的行，不进 sorted_ids，也不算进实际用到的行数；算进去了，GPU 要多启动一批只算空活的程序块，sorted_ids 末尾还多出一串不该有的格子编号。只要输入里有 -1 就错。
# 判词里要有：-1 的格子也排了进来
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = align_blocks


def align_blocks(topk_ids, block_size, num_experts):
    _checked(topk_ids, block_size, num_experts)
    k = len(topk_ids[0])
    pairs = len(topk_ids) * k
    buckets = [[] for _ in range(num_experts + 1)]
    for m, row in enumerate(topk_ids):
        for j, e in enumerate(row):
            buckets[e if e >= 0 else num_experts].append(m * k + j)
    sorted_ids, expert_ids = [], []
    for e, mine in enumerate(buckets):
        blocks = (len(mine) + block_size - 1) // block_size
        sorted_ids += mine + [pairs] * (blocks * block_size - len(mine))
        expert_ids += [e if e < num_experts else -1] * blocks
    used = len(sorted_ids)
    capacity = padded_capacity(pairs, num_experts, block_size)
    sorted_ids += [pairs] * (capacity - used)
    expert_ids += [-1] * (capacity // block_size - len(expert_ids))
    return sorted_ids, expert_ids, used
