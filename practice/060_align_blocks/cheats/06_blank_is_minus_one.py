# 作弊：空行填 -1，不填 pairs = M·k
# 为什么必须判错：题目规定空行的值是 pairs（一个不存在的格子编号）：算子拿 sorted_ids 里的值除以 k 找 token、查 topk_weights，用“≥ pairs”判断空行；-1 在 Python 和 C++ 里都会被当成最后一个元素或越界地址去读。只要有一个专家要补空行就错。
# 判词里要有：空行填的是 -1
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_full = align_blocks


def align_blocks(topk_ids, block_size, num_experts):
    sorted_ids, expert_ids, used = _full(topk_ids, block_size, num_experts)
    pairs = len(topk_ids) * len(topk_ids[0])
    return [-1 if s == pairs else s for s in sorted_ids], expert_ids, used
