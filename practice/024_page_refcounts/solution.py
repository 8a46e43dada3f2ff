"""练习 024 · 按持有份数管理的页池 —— 参考答案。"""

from __future__ import annotations

from collections import Counter


class PagePool:
    """页号 0 … num_pages-1；每页记着被持有几份，降到 0 才回到空闲页。"""

    def __init__(self, num_pages: int) -> None:
        self.num_pages = num_pages
        self._refs = [0] * num_pages
        self._free = list(range(num_pages - 1, -1, -1))  # 栈：先发出 0、1、2……

    @property
    def num_free(self) -> int:
        return len(self._free)

    def refs(self, page: int) -> int:
        return self._refs[page]

    def _check_pages(self, pages: list[int]) -> None:
        for page in pages:
            if not 0 <= page < self.num_pages:
                raise ValueError(f"没有 {page} 号页（共 {self.num_pages} 页）")

    def alloc(self, n: int) -> list[int]:
        if n < 0 or n > len(self._free):
            raise ValueError(f"要 {n} 页，只剩 {len(self._free)} 页空闲")
        pages = [self._free.pop() for _ in range(n)]
        for page in pages:
            self._refs[page] = 1
        return pages

    def hold(self, pages: list[int]) -> None:
        self._check_pages(pages)
        for page in pages:  # 先全部检查，再改
            if self._refs[page] == 0:
                raise ValueError(f"{page} 号页是空闲页，不能加持有")
        for page in pages:
            self._refs[page] += 1

    def release(self, pages: list[int]) -> list[int]:
        self._check_pages(pages)
        for page, times in Counter(pages).items():  # 先全部检查，再改
            if self._refs[page] < times:
                raise ValueError(f"{page} 号页只有 {self._refs[page]} 份持有，要放下 {times} 份")
        freed = []
        for page in pages:
            self._refs[page] -= 1
            if self._refs[page] == 0:
                self._free.append(page)
                freed.append(page)
        return freed
