# 作弊：不满一页的尾巴也交给缓存
# 为什么必须判错：题目要求只把整页交给缓存（n = cached_len // page_size）、返回 n * page_size；它把不满一页的尾巴也交出去、返回 cached_len，不是整页时 insert 的参数和返回值都不对。
# 判词里要有：只收整页
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def cache_req(pool, cache, row_pages, tokens, cached_len, *, page_size, finished):
    if not 0 <= cached_len <= len(tokens) or cached_len > len(row_pages) * page_size:
        raise ValueError("参数不对")
    n = -(-cached_len // page_size)
    already = cache.insert(list(tokens[:cached_len]), list(row_pages[:n]))
    pool.hold(list(row_pages[already:n]))
    if finished:
        pool.release(list(row_pages))
    return cached_len
