"""按页分配 KV 池的槽位，并把槽位填进页表。

KV 池有 num_pages × page_size 个槽位。分配以"页"为单位（连续的 page_size 个槽位），
页表却按 token 记：``page_table[row, pos]`` 就是请求（第 row 行）第 pos 个 token 的槽位。
两者的关系只有一条::

    page_table[row, pos] = 页号 × page_size + pos % page_size

也就是说，一个请求的第 0..page_size-1 个 token 在同一页，第 page_size..2·page_size-1 个在
下一页（页号不必相邻），依此类推。由此推出分配规则：

- pos % page_size == 0 的位置开启一页新页；
- 其余位置接在 ``page_table[row, pos - 1]`` 的下一个槽位上（同一页里还没用的部分）。

为什么按页而不是按 token 分配：更快的注意力内核（第 17 章）按页读 K/V；前缀缓存
（第 9 章）也按整页共享。page_size = 1 时两者没有区别。

空闲页的记账全在 CPU 上（一个 Python 列表），分配时不用读设备上的页表，
不会引起 GPU 同步；只有 free_slots 要把页号从页表里读回来。
"""

from __future__ import annotations

from typing import Iterable

import torch

from minisgl.utils import align_ceil, div_ceil


class OutOfPagesError(RuntimeError):
    """空闲页不够。调度器应当先用 pages_needed / num_free_pages 判断，再分配。"""


class PageAllocator:
    """管理 KV 池里哪些页空闲，并替请求把槽位写进页表。"""

    def __init__(self, num_pages: int, page_size: int, device: torch.device | str) -> None:
        for name, value in (("num_pages", num_pages), ("page_size", page_size)):
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise ValueError(f"{name} 必须是 ≥ 1 的整数，收到 {value!r}")
        self.num_pages = num_pages
        self.page_size = page_size
        self.device = torch.device(device)
        # 空闲页是一个栈，pop() 从末尾取。初始是 [n-1, ..., 1, 0]，所以先发出 0、1、2……；
        # 还回来的页压在栈顶，下一次最先被用到
        self._free_pages: list[int] = list(range(num_pages - 1, -1, -1))
        self._is_free: list[bool] = [True] * num_pages  # 用来发现重复释放

    @property
    def num_free_pages(self) -> int:
        return len(self._free_pages)

    @property
    def num_used_pages(self) -> int:
        return self.num_pages - len(self._free_pages)

    def pages_needed(self, start: int, end: int) -> int:
        """给位置 [start, end) 分配槽位要几页新页：区间里 pos % page_size == 0 的位置个数。"""
        if not 0 <= start <= end:
            raise ValueError(f"位置区间必须满足 0 ≤ start ≤ end，收到 start={start}, end={end}")
        return div_ceil(end, self.page_size) - div_ceil(start, self.page_size)

    # ---------------------------------------------------------------- 以页为单位

    def alloc_pages(self, n: int) -> list[int]:
        """取 n 个空闲页。不够时抛 OutOfPagesError，并且什么都不改。"""
        if n < 0:
            raise ValueError(f"页数不能是负数，收到 {n}")
        if n > len(self._free_pages):
            raise OutOfPagesError(
                f"KV 池的页不够：需要 {n} 页，只剩 {len(self._free_pages)} 页空闲"
                f"（共 {self.num_pages} 页，每页 {self.page_size} 个 token）"
            )
        pages = [self._free_pages.pop() for _ in range(n)]
        for page in pages:
            self._is_free[page] = False
        return pages

    def free_pages(self, pages: Iterable[int]) -> None:
        """把页还回来。页号越界、重复、或本来就空闲，都报错，并且什么都不改。"""
        pages = [int(p) for p in pages]
        for page in pages:
            if not 0 <= page < self.num_pages:
                raise ValueError(f"页号 {page} 超出范围 [0, {self.num_pages})")
        if len(set(pages)) != len(pages):
            raise ValueError(f"同一页在一次释放里出现了不止一次：{sorted(pages)}")
        already = [p for p in pages if self._is_free[p]]
        if already:
            raise ValueError(f"重复释放：页 {already} 本来就是空闲的")
        for page in reversed(pages):  # 倒着压栈，下次按原来的顺序取出
            self._is_free[page] = True
            self._free_pages.append(page)

    # ---------------------------------------------------------------- 以页表为单位

    def alloc_slots(
        self, page_table: torch.Tensor, row: int, start: int, end: int
    ) -> torch.Tensor:
        """给第 row 行的位置 [start, end) 分配槽位，写进 page_table[row, start:end] 并返回。

        要求 [0, start) 已经分配过（由之前的调用）。返回的 out_loc 就是这一步这些 token 的
        K/V 要写进 KV 池的槽位。页不够时抛 OutOfPagesError，页表和空闲页都不变。
        """
        self._check_table(page_table, row, end)
        if not 0 <= start <= end:
            raise ValueError(f"位置区间必须满足 0 ≤ start ≤ end，收到 start={start}, end={end}")
        ps = self.page_size
        # [start, start+tail) 落在最后一页还没用完的部分；其余的 [start+tail, end) 需要新页
        tail = min(end, align_ceil(start, ps)) - start
        pages = self.alloc_pages(self.pages_needed(start, end))  # 页不够就在这里报错，什么都没改

        parts = []
        if tail > 0:
            # 接着上一个 token 的槽位往后数。在设备上算，不把页表读回 CPU
            offsets = torch.arange(1, tail + 1, dtype=torch.int32, device=page_table.device)
            parts.append(page_table[row, start - 1] + offsets)
        if pages:
            page_ids = torch.tensor(pages, dtype=torch.int32, device=page_table.device)
            in_page = torch.arange(ps, dtype=torch.int32, device=page_table.device)
            new_slots = (page_ids[:, None] * ps + in_page).flatten()  # 每页 ps 个连续槽位
            parts.append(new_slots[: end - start - tail])  # 最后一页可能只用到一部分
        if parts:
            out_loc = torch.cat(parts)
        else:
            out_loc = torch.empty(0, dtype=torch.int32, device=page_table.device)
        page_table[row, start:end] = out_loc
        return out_loc

    def free_slots(
        self, page_table: torch.Tensor, row: int, length: int, *, start: int = 0
    ) -> None:
        """还回第 row 行位置 [start, length) 所在的页（默认从 0 开始，即整个请求）。

        start 必须在页的边界上：一页只能整页还。页表这一行的内容不清除，
        拿到这一行的下一个请求会覆盖它。
        """
        self._check_table(page_table, row, length)
        if start % self.page_size != 0 or not 0 <= start <= length:
            raise ValueError(
                f"free_slots 要求 0 ≤ start ≤ length 且 start 是 page_size={self.page_size} 的"
                f"整数倍，收到 start={start}, length={length}"
            )
        # 每页的第一个位置就代表这一页：它的槽位 // page_size 就是页号
        first_slots = page_table[row, start:length:self.page_size]
        self.free_pages((first_slots // self.page_size).tolist())

    def _check_table(self, page_table: torch.Tensor, row: int, end: int) -> None:
        if not (isinstance(page_table, torch.Tensor) and page_table.dim() == 2
                and page_table.dtype == torch.int32):
            raise ValueError("page_table 必须是二维 int32 张量 [行数, 最大序列长度]")
        rows, width = page_table.shape
        if not 0 <= row < rows:
            raise IndexError(f"行号 {row} 超出页表范围 [0, {rows})")
        if not 0 <= end <= width:
            raise ValueError(f"位置 {end} 超出页表宽度：每行最多 {width} 个 token")

    def __repr__(self) -> str:
        return (
            f"PageAllocator(num_pages={self.num_pages}, page_size={self.page_size}, "
            f"free={self.num_free_pages})"
        )
