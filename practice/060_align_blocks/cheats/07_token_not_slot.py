# 作弊：sorted_ids 里放 token 编号 m，不放格子编号 m·k + j
# 为什么必须判错：题目要求放格子编号 m·k + j：算子要靠它找到这一行用的是 topk_weights[m][j]，还要把结果加回第 m 个 token；只放 m，同一个 token 选的几个专家就分不清权重了。k > 1 时就错。
# 判词里要有：token 编号 m
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_full = align_blocks


def align_blocks(topk_ids, block_size, num_experts):
    sorted_ids, expert_ids, used = _full(topk_ids, block_size, num_experts)
    k = len(topk_ids[0])
    pairs = len(topk_ids) * k
    return [s if s == pairs else s // k for s in sorted_ids], expert_ids, used
