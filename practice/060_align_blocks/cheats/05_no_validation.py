# 作弊：不检查参数，越界的专家编号、bool、长短不一的行、block_size = 0 都照样往下算
# 为什么必须判错：题目要求坏参数抛 ValueError。专家编号 ≥ num_experts 会在别处抛 IndexError，-2 会悄悄落进倒数第二个专家的桶，长短不一的行让格子编号 m·k + j 撞车，block_size = 0 是 ZeroDivisionError：都不是调用者能据此处理的错误。
# 判词里要有：ValueError
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def padded_capacity(num_pairs, num_experts, block_size):
    worst = num_pairs + num_experts * (block_size - 1)
    return (worst + block_size - 1) // block_size * block_size


def align_blocks(topk_ids, block_size, num_experts):
    k = len(topk_ids[0]) if topk_ids else 0
    pairs = len(topk_ids) * k
    buckets = [[] for _ in range(num_experts)]
    for m, row in enumerate(topk_ids):
        for j, e in enumerate(row):
            if e != -1:
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
