# 作弊：只拒绝 cached_len == -1，更小的负数当成 0（旧评测的负数总是 -1）
# 为什么必须判错：题目要求 cached_len 不在 [0, len(tokens)] 之内就抛 ValueError；-3 这样的负数照样要拒绝，不能悄悄改成别的值接着算。
# 判词里要有：是负数
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked_cache_req = cache_req


def cache_req(pool, cache, row_pages, tokens, cached_len, *, page_size, finished):
    if cached_len < -1:
        cached_len = 0
    return _checked_cache_req(pool, cache, row_pages, tokens, cached_len, page_size=page_size, finished=finished)
