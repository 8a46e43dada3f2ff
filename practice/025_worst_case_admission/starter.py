"""练习 025 · 按最坏情况接纳（第 8 章 CacheManager）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def admit(
    pending: list[tuple[int, int, int, int]],
    running: list[tuple[int, int]],
    *,
    page_size: int,
    free_pages: int,
    evictable_pages: int,
    free_rows: int,
    token_budget: int,
) -> int:
    """从队头起能接纳几个请求。

    pending 的每项是 (input_len, max_tokens, cached_len, lock_pages)，running 的每项是
    (cached_len, max_device_len)。先到先得，第一个放不下的就停。参数不合法时抛 ValueError。
    """
    raise NotImplementedError
