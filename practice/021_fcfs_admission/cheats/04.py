# 作弊：在跑的请求把最后一个 token 也算进去
# 为什么必须判错：题目要求在跑的请求最坏还要 ceil((max_device_len - 1) / page_size) - ceil(cached_len / page_size) 页：最后一个 token 不进 KV 池；它少减了这个 1，恰好跨页时多算一页。
# 判词里要有：不进 KV 池
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def inflight_pages(running, page_size):
    _check_page_size(page_size)
    return sum(_div_ceil(m, page_size) - _div_ceil(c, page_size) for c, m in running)
