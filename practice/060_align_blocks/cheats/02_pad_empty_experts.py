# 作弊：每个专家都至少占一块，一个格子都没有的专家也补一整块空行
# 为什么必须判错：题目要求格子数是 0 的专家不占块。多出来的整块空行让 GPU 白算，expert_ids 里也多出了不该有的专家；路由一偏（只有几个专家有格子），num_tokens_post_padded 还会超过 padded_capacity 的上界，缓冲区装不下。
# 判词里要有：没有格子的专家也占了一块
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = align_blocks


def align_blocks(topk_ids, block_size, num_experts):
    _checked(topk_ids, block_size, num_experts)
    k = len(topk_ids[0])
    pairs = len(topk_ids) * k
    sorted_ids, expert_ids = [], []
    for e in range(num_experts):
        mine = [m * k + j for m, row in enumerate(topk_ids) for j, x in enumerate(row) if x == e]
        blocks = max(1, (len(mine) + block_size - 1) // block_size)
        sorted_ids += mine + [pairs] * (blocks * block_size - len(mine))
        expert_ids += [e] * blocks
    used = len(sorted_ids)
    capacity = padded_capacity(pairs, num_experts, block_size)
    sorted_ids += [pairs] * (capacity - used)
    expert_ids += [-1] * (capacity // block_size - len(expert_ids))
    return sorted_ids, expert_ids, used
