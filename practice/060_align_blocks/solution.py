"""练习 060 · 按专家排块：moe_align_block_size 的排法、补齐和固定长度（第 20 章 MoE）

参考答案。
"""

from __future__ import annotations


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def padded_capacity(num_pairs: int, num_experts: int, block_size: int) -> int:
    """排好、补齐之后最多有几行：num_pairs + num_experts·(block_size − 1)，再向上取整到 block_size 的倍数。
    坏参数抛 ValueError。"""
    if not (_is_int(num_pairs) and _is_int(num_experts) and _is_int(block_size)):
        raise ValueError("num_pairs、num_experts、block_size 都要是整数")
    if num_pairs < 0 or num_experts < 1 or block_size < 1:
        raise ValueError(f"要 num_pairs >= 0、num_experts >= 1、block_size >= 1，"
                         f"收到 {num_pairs}、{num_experts}、{block_size}")
    worst = num_pairs + num_experts * (block_size - 1)  # 每个专家最多补 block_size − 1 行
    return (worst + block_size - 1) // block_size * block_size


def align_blocks(topk_ids: list[list[int]], block_size: int, num_experts: int
                 ) -> tuple[list[int], list[int], int]:
    """M 行、每行 k 个专家编号（-1 = 不在本 rank 上）→ (sorted_ids, expert_ids, num_tokens_post_padded)。

    格子 (m, j) 的编号是 m·k + j。sorted_ids 按专家从小到大排，同一专家内格子编号升序，每个专家的那一段
    补空行（值 pairs = M·k）到 block_size 的整数倍，再补空行到 padded_capacity(pairs, E, block_size)；
    expert_ids 每块一项，没用到的块是 -1；num_tokens_post_padded 是实际用到的行数。坏参数抛 ValueError。"""
    if not _is_int(block_size) or block_size < 1:
        raise ValueError(f"block_size 要是正整数，收到 {block_size!r}")
    if not _is_int(num_experts) or num_experts < 1:
        raise ValueError(f"num_experts 要是正整数，收到 {num_experts!r}")
    if not isinstance(topk_ids, list) or not topk_ids:
        raise ValueError("topk_ids 要是非空的列表")
    if not all(isinstance(row, list) for row in topk_ids):
        raise ValueError("topk_ids 的每一行要是列表")
    k = len(topk_ids[0])
    if k == 0 or any(len(row) != k for row in topk_ids):
        raise ValueError("topk_ids 的每一行要一样长，而且不能是空的")
    for row in topk_ids:
        for x in row:
            if not _is_int(x) or not -1 <= x < num_experts:
                raise ValueError(f"专家编号要是 [-1, {num_experts}) 里的整数，收到 {x!r}")

    pairs = len(topk_ids) * k
    buckets: list[list[int]] = [[] for _ in range(num_experts)]
    for m, row in enumerate(topk_ids):  # 按格子编号的顺序走一遍：每个桶里自然是升序
        for j, e in enumerate(row):
            if e >= 0:  # 别写成 buckets[e]：e = -1 会落进最后一个专家的桶
                buckets[e].append(m * k + j)

    sorted_ids: list[int] = []
    expert_ids: list[int] = []
    for e, mine in enumerate(buckets):
        blocks = (len(mine) + block_size - 1) // block_size  # 没有格子的专家：0 块
        sorted_ids += mine + [pairs] * (blocks * block_size - len(mine))
        expert_ids += [e] * blocks
    used = len(sorted_ids)
    capacity = padded_capacity(pairs, num_experts, block_size)  # 只取决于形状
    sorted_ids += [pairs] * (capacity - used)
    expert_ids += [-1] * (capacity // block_size - len(expert_ids))
    return sorted_ids, expert_ids, used
