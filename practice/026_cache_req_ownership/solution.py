"""练习 026 · 把算好的前缀交给缓存：谁持有哪几页 —— 参考答案。"""

from __future__ import annotations


def cache_req(pool, cache, row_pages, tokens, cached_len, *, page_size, finished):
    if not 0 <= cached_len <= len(tokens):
        raise ValueError(f"cached_len={cached_len} 不在 [0, {len(tokens)}] 之内")
    if cached_len > len(row_pages) * page_size:
        raise ValueError(f"这一行只有 {len(row_pages)} 页，放不下 {cached_len} 个 token")
    n = cached_len // page_size  # 只交整页
    already = cache.insert(list(tokens[: n * page_size]), list(row_pages[:n]))
    pool.hold(list(row_pages[already:n]))  # 缓存新收下的页：它持有一份
    if finished:
        pool.release(list(row_pages))  # 这一行只放下自己的那一份
    return n * page_size
