# 作弊：空闲页不够时先把够的部分填上
# 为什么必须判错：题目要求空闲页不够时抛 RuntimeError 且 table、free_pages 都不变；它边填边取页，到需要新页却没有时才抛，前面不需要新页的位置和已取走的页都已经改了。
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
