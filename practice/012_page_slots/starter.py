"""练习 012 · 按页分配 token 槽位（第 4 章 KV 池、页表与 token 池）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def alloc_slots(
    table: list[list[int]],
    row: int,
    start: int,
    end: int,
    free_pages: list[int],
    page_size: int,
) -> list[int]:
    """给第 row 行的位置 [start, end) 分配槽位，写进 table[row][start:end]，并按顺序返回它们。

    位置 pos 的槽位：pos % page_size == 0 时从 free_pages 最前面取一页 p（原地删掉），槽位是
    p * page_size；否则是 table[row][pos - 1] + 1。
    空闲页不够时抛 RuntimeError，table 和 free_pages 都不改；
    page_size < 1 或不满足 0 <= start <= end <= len(table[row]) 时抛 ValueError。
    """
    raise NotImplementedError


def free_row(
    table: list[list[int]], row: int, length: int, free_pages: list[int], page_size: int
) -> None:
    """把第 row 行位置 [0, length) 用到的页按位置顺序追加到 free_pages 末尾（每页一次）。

    length 不在 [0, len(table[row])] 里或 page_size < 1 时抛 ValueError。
    """
    raise NotImplementedError
