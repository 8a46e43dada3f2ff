# 作弊：按 len(tokens) 算交出去的整页数，不看 cached_len（旧评测里 tokens 总是正好 cached_len 个）
# 为什么必须判错：tokens 里可能还有刚采样出来、K/V 还没写进池的 token；交给缓存的只能是已经在池里的前 cached_len // page_size 个整页。
# 判词里要有：cache.insert｜的返回值
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def cache_req(pool, cache, row_pages, tokens, cached_len, *, page_size, finished):
    if not 0 <= cached_len <= len(tokens):
        raise ValueError(f"cached_len={cached_len} 不在 [0, {len(tokens)}] 之内")
    if cached_len > len(row_pages) * page_size:
        raise ValueError(f"这一行只有 {len(row_pages)} 页，放不下 {cached_len} 个 token")
    n = len(tokens) // page_size  # 把全部 token 都当成已经在池里
    already = cache.insert(list(tokens[: n * page_size]), list(row_pages[:n]))
    pool.hold(list(row_pages[already:n]))
    if finished:
        pool.release(list(row_pages))
    return n * page_size
