# 作弊：缓存里已经有的重复页当场还掉（上游的做法）
# 为什么必须判错：题目要求缓存原来就有的重复页这一行不能现在就还——页表还指着它们；它照上游当场 release，B 自己算的那几页（只归 B 的行）回到空闲页，会被分给别人覆盖，B 还要接着 decode。
# 判词里要有：只归 B 的行
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def cache_req(pool, cache, row_pages, tokens, cached_len, *, page_size, finished):
    if not 0 <= cached_len <= len(tokens) or cached_len > len(row_pages) * page_size:
        raise ValueError("参数不对")
    n = cached_len // page_size
    borrowed = 0  # 借来的页缓存也持有，份数 ≥ 2
    while borrowed < n and pool.refs[row_pages[borrowed]] >= 2:
        borrowed += 1
    already = cache.insert(list(tokens[:n * page_size]), list(row_pages[:n]))
    pool.hold(list(row_pages[already:n]))
    if finished:
        pool.release(list(row_pages))
    else:
        pool.release(list(row_pages[borrowed:already]))  # 上游：重复的页当场还回空闲页
    return n * page_size
