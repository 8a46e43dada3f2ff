"""练习 060 · 按专家排块：moe_align_block_size 的排法、补齐和固定长度（第 20 章 MoE）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def padded_capacity(num_pairs: int, num_experts: int, block_size: int) -> int:
    """排好、补齐之后最多有几行：num_pairs + num_experts·(block_size − 1)，再向上取整到 block_size 的倍数。
    坏参数抛 ValueError。"""
    raise NotImplementedError


def align_blocks(topk_ids: list[list[int]], block_size: int, num_experts: int
                 ) -> tuple[list[int], list[int], int]:
    """M 行、每行 k 个专家编号（-1 = 不在本 rank 上）→ (sorted_ids, expert_ids, num_tokens_post_padded)。

    格子 (m, j) 的编号是 m·k + j。sorted_ids 按专家从小到大排，同一专家内格子编号升序，每个专家的那一段
    补空行（值 pairs = M·k）到 block_size 的整数倍，再补空行到 padded_capacity(pairs, E, block_size)；
    expert_ids 每块一项，没用到的块是 -1；num_tokens_post_padded 是实际用到的行数。坏参数抛 ValueError。"""
    raise NotImplementedError
