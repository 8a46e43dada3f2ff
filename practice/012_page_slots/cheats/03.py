# 作弊：page_size 只查是不是 0（`if not page_size`），负数的 page_size 照样往下算
# 为什么必须判错：page_size 是负数时 `pos % page_size`、`_pages_up_to(end, page_size)` 都按负数算，页数和槽位全是错的：返回的槽位（比如 [0, 1, 2, 3, 4]）根本不在 free_pages 给的页里，会和别的请求撞在一起；题目要的是 page_size < 1 一律 ValueError，旧测试只拿 0 试过
# 判词里要有：page_size 是坏的
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_alloc, _free = alloc_slots, free_row


def alloc_slots(table, row, start, end, free_pages, page_size):
    if not page_size:
        raise ValueError("page_size 不能是 0")
    line = table[row]
    if not (0 <= start <= end <= len(line)):
        raise ValueError("start / end 不对")
    need = _pages_up_to(end, page_size) - _pages_up_to(start, page_size)
    if need > len(free_pages):
        raise RuntimeError("空闲页不够")
    new_pages = free_pages[:need]
    del free_pages[:need]
    out, taken = [], 0
    for pos in range(start, end):
        if pos % page_size == 0:
            slot = new_pages[taken] * page_size
            taken += 1
        else:
            slot = line[pos - 1] + 1
        line[pos] = slot
        out.append(slot)
    return out


def free_row(table, row, length, free_pages, page_size):
    if not page_size:
        raise ValueError("page_size 不能是 0")
    if not (0 <= length <= len(table[row])):
        raise ValueError("length 不对")
    for pos in range(0, length, page_size):
        free_pages.append(table[row][pos] // page_size)
