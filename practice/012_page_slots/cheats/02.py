# 作弊：每次分配都开新页，不接着用最后一页
# 为什么必须判错：题目要求位置不是页首时接着用前一个 token 所在的页（槽位 = table[row][pos-1] + 1）；它每次调用都从新页开始，decode 和没对齐页边界的续写多占页、槽位也和参考不一样。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def alloc_slots(table, row, start, end, free_pages, page_size):
    if page_size < 1 or not (0 <= start <= end <= len(table[row])):
        raise ValueError("参数不对")
    need = _pages_up_to(end - start, page_size)
    if need > len(free_pages):
        raise RuntimeError("没有空闲页了")
    pages = free_pages[:need]
    del free_pages[:need]
    out = [pages[i // page_size] * page_size + i % page_size for i in range(end - start)]
    table[row][start:end] = out
    return out
