"""练习 024 · 按持有份数管理的页池（第 8 章 CacheManager）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


class PagePool:
    """页号 0 … num_pages-1；每页记着被持有几份，降到 0 才回到空闲页。"""

    def __init__(self, num_pages: int) -> None:
        self.num_pages = num_pages
        raise NotImplementedError

    @property
    def num_free(self) -> int:
        """空闲页的个数。"""
        raise NotImplementedError

    def refs(self, page: int) -> int:
        """这一页现在有几份持有（空闲页是 0）。"""
        raise NotImplementedError

    def alloc(self, n: int) -> list[int]:
        """取 n 个空闲页，各记 1 份持有。不够时抛 ValueError，什么都不改。"""
        raise NotImplementedError

    def hold(self, pages: list[int]) -> None:
        """给已经有人持有的页各加 1 份。有空闲页时抛 ValueError，什么都不改。"""
        raise NotImplementedError

    def release(self, pages: list[int]) -> list[int]:
        """每出现一次放下 1 份；返回这一次降到 0、回到空闲页的页。放多了抛 ValueError，什么都不改。"""
        raise NotImplementedError
