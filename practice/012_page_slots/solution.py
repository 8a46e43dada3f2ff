"""练习 012 · 按页分配 token 槽位 —— 参考答案。"""

from __future__ import annotations


def _pages_up_to(length: int, page_size: int) -> int:
    """位置 [0, length) 占几页：ceil(length / page_size)。"""
    return (length + page_size - 1) // page_size


def alloc_slots(
    table: list[list[int]],
    row: int,
    start: int,
    end: int,
    free_pages: list[int],
    page_size: int,
) -> list[int]:
    if page_size < 1:
        raise ValueError(f"page_size 至少是 1：{page_size}")
    line = table[row]
    if not (0 <= start <= end <= len(line)):
        raise ValueError(
            f"要求 0 <= start <= end <= {len(line)}（这一行的长度），现在 start={start}, end={end}"
        )
    # 先数清楚要几页新的，不够就在动手之前报错：失败时什么都没改
    need = _pages_up_to(end, page_size) - _pages_up_to(start, page_size)
    if need > len(free_pages):
        raise RuntimeError(
            f"位置 [{start}, {end}) 需要 {need} 页新的，空闲页只剩 {len(free_pages)} 页"
        )
    new_pages = free_pages[:need]
    del free_pages[:need]  # 原地删掉：调用者手里的就是这个列表

    out: list[int] = []
    taken = 0
    for pos in range(start, end):
        if pos % page_size == 0:  # 开新的一页，从页首开始
            slot = new_pages[taken] * page_size
            taken += 1
        else:  # 和前一个 token 在同一页：紧挨着它
            slot = line[pos - 1] + 1
        line[pos] = slot
        out.append(slot)
    return out


def free_row(
    table: list[list[int]], row: int, length: int, free_pages: list[int], page_size: int
) -> None:
    if page_size < 1:
        raise ValueError(f"page_size 至少是 1：{page_size}")
    line = table[row]
    if not (0 <= length <= len(line)):
        raise ValueError(f"length 必须在 [0, {len(line)}] 里，现在是 {length}")
    # 每页的第一个位置是 0, page_size, 2*page_size, ……：它的槽位整除 page_size 就是页号
    for pos in range(0, length, page_size):
        free_pages.append(line[pos] // page_size)
