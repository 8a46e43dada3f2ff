# 作弊：按专家排好就直接接在一起，不给每个专家的那一段补空行；expert_ids 取每块第一行的专家
# 为什么必须判错：题目要求每个专家的那一段补到 block_size 的整数倍：GPU 上一个程序块算一块、只读一个专家的权重，一块里混进下一个专家的行，那几行就乘错了权重。只要有一个专家的格子数不是 block_size 的倍数就错。
# 判词里要有：没有补空行
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = align_blocks


def align_blocks(topk_ids, block_size, num_experts):
    _checked(topk_ids, block_size, num_experts)  # 只为了同样地检查参数
    k = len(topk_ids[0])
    pairs = len(topk_ids) * k
    order = sorted((e, m * k + j) for m, row in enumerate(topk_ids) for j, e in enumerate(row) if e >= 0)
    sorted_ids = [slot for _, slot in order]
    expert_ids = [order[i][0] for i in range(0, len(order), block_size)]
    used = len(sorted_ids)
    capacity = padded_capacity(pairs, num_experts, block_size)
    sorted_ids += [pairs] * (capacity - used)
    expert_ids += [-1] * (capacity // block_size - len(expert_ids))
    return sorted_ids, expert_ids, used
