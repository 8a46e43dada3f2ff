# 作弊：原来就在缓存里的页也让缓存加一份
# 为什么必须判错：题目要求只给缓存新收下的页 row_pages[already:n] 加一份持有；它对前 n 页都 hold，缓存原来就有、没收下的那些页多了一份持有，请求结束后也回不到空闲页。
# 判词里要有：持有份数
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_cache_req = cache_req
def cache_req(pool, cache, row_pages, tokens, cached_len, *, page_size, finished):
    if not 0 <= cached_len <= len(tokens) or cached_len > len(row_pages) * page_size:
        raise ValueError("参数不对")
    n = cached_len // page_size
    cache.insert(list(tokens[:n * page_size]), list(row_pages[:n]))
    pool.hold(list(row_pages[:n]))
    if finished:
        pool.release(list(row_pages))
    return n * page_size
