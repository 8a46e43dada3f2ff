# 作弊：expert_ids 每个有格子的专家记一项，再补 -1 到块数，不是每块一项
# 为什么必须判错：题目要求 expert_ids 每块一项：GPU 上第 b 个程序块读 expert_ids[b] 决定用哪个专家的权重；一个专家占了两块以上时，后面的块全都对错了专家。只要有一个专家的格子数超过 block_size 就错。
# 判词里要有：有格子的）专家一项
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_full = align_blocks


def align_blocks(topk_ids, block_size, num_experts):
    sorted_ids, expert_ids, used = _full(topk_ids, block_size, num_experts)
    present = sorted({e for row in topk_ids for e in row if e >= 0})
    return sorted_ids, present + [-1] * (len(expert_ids) - len(present)), used
