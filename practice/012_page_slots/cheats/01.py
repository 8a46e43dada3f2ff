# 作弊：空闲页不够时先把够的部分填上
# 为什么必须判错：它绕过了这道题的要点（空闲页不够时先把够的部分填上），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def alloc_slots(table, row, start, end, free_pages, page_size):
    if page_size < 1 or not (0 <= start <= end <= len(table[row])):
        raise ValueError("参数不对")
    line, out = table[row], []
    for pos in range(start, end):
        if pos % page_size == 0:
            if not free_pages:
                raise RuntimeError("没有空闲页了")
            slot = free_pages.pop(0) * page_size
        else:
            slot = line[pos - 1] + 1
        line[pos] = slot
        out.append(slot)
    return out
