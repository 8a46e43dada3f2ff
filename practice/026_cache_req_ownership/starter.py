"""练习 026 · 把算好的前缀交给缓存：谁持有哪几页（第 8 章 CacheManager）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def cache_req(pool, cache, row_pages: list[int], tokens: list[int], cached_len: int, *,
              page_size: int, finished: bool) -> int:
    """把 [0, cached_len) 里的整页交给缓存；缓存新收下的页由它加一份持有。

    finished=True 时这一行放下它持有的每一页。返回缓存里与这个请求开头相同的长度。
    参数不合法时抛 ValueError，什么都不改。
    """
    raise NotImplementedError
