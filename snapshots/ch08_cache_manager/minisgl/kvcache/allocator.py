"""按页分配 KV 池的槽位，并把槽位写进页表。

KV 池有 num_pages × page_size 个槽位，连续的 page_size 个槽位是一页。页表按 token 记：
``page_table[row, pos]`` 是第 row 行（一个请求）第 pos 个 token 的槽位，规则只有一条::

    page_table[row, pos] = 它的第 pos // page_size 页的页号 × page_size + pos % page_size

这条规则只写在 pages_to_slots 里：要从页算槽位的代码都调用它；slots_to_pages 反过来，
把一页一页完整排好的槽位（前缀缓存存的就是这样的）换回页号。

记账全在 CPU 上：空闲页是一个栈，每页有一个引用计数（有几方持有它），每行记着自己
按顺序用了哪些页。分配和释放都只读这些 Python 列表，从不把页表从设备上读回来。

一页可以有多个持有者：前缀缓存存下的页，缓存持有一份；新请求借用它，这一行
再持有一份（share_prefix）。每一方只放下自己那一份，最后一方放下时页才回到空闲栈，
所以只要还有一行指着某页，这一页就不会被别人拿去覆盖。
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Iterable, Sequence

import torch

from minisgl.utils import div_ceil, to_device

if TYPE_CHECKING:
    from minisgl.core import Req


def pages_to_slots(
    pages: Sequence[int], page_size: int, start: int = 0, end: int | None = None
) -> list[int]:
    """一行按顺序用着 pages 这几页时，它的位置 [start, end) 各在哪个槽位；end 默认到最后一页的末尾。"""
    end = len(pages) * page_size if end is None else end
    assert 0 <= start <= end <= len(pages) * page_size, f"位置 [{start}, {end}) 超出了这 {len(pages)} 页"
    return [pages[pos // page_size] * page_size + pos % page_size for pos in range(start, end)]


def slots_to_pages(slots: Sequence[int] | torch.Tensor, page_size: int) -> list[int]:
    """pages_to_slots 反过来：一页一页完整排好的槽位 -> 页号。不是整页时断言失败。"""
    slots = torch.as_tensor(slots).tolist()
    pages = [slot // page_size for slot in slots[::page_size]]  # 每页的第一个槽位
    assert slots == pages_to_slots(pages, page_size), f"这 {len(slots)} 个槽位不是一页一页完整排好的"
    return pages


class OutOfPagesError(RuntimeError):
    """空闲页不够。调度器应当先用 pages_needed / num_free_pages 判断，再分配。"""


class PageAllocator:
    """管理 KV 池的页：谁空闲、谁被持有；替一批请求把槽位写进（构造时给定的）页表。"""

    def __init__(self, num_pages: int, page_size: int, page_table: torch.Tensor) -> None:
        assert num_pages >= 1 and page_size >= 1
        assert page_table.dim() == 2 and page_table.dtype == torch.int32
        self.num_pages = num_pages
        self.page_size = page_size
        self.page_table = page_table
        self.device = page_table.device
        # 空闲页栈：pop() 从末尾取，所以先发出 0、1、2……；还回来的页下一次最先被用到
        self._free: list[int] = list(range(num_pages - 1, -1, -1))
        self._refs: list[int] = [0] * num_pages  # 每页被几方持有；0 = 空闲
        self._rows: list[list[int]] = [[] for _ in range(len(page_table))]  # 每行的页，按顺序

    @property
    def num_free_pages(self) -> int:
        return len(self._free)

    @property
    def num_used_pages(self) -> int:
        return self.num_pages - len(self._free)

    @property
    def num_holds(self) -> int:
        """所有页的持有份数之和（一页被两方持有算两份）。"""
        return sum(self._refs)

    def pages_needed(self, start: int, end: int) -> int:
        """位置 [start, end) 要几页新页：区间里 pos % page_size == 0 的位置个数。"""
        assert 0 <= start <= end
        return div_ceil(end, self.page_size) - div_ceil(start, self.page_size)

    # ---------------------------------------------------------------- 以页为单位

    def alloc_pages(self, n: int) -> list[int]:
        """取 n 个空闲页，调用者持有它们（引用计数 1）。不够时报错，什么都不改。"""
        assert n >= 0
        if n > len(self._free):
            raise OutOfPagesError(
                f"KV 池的页不够：需要 {n} 页，只剩 {len(self._free)} 页空闲"
                f"（共 {self.num_pages} 页，每页 {self.page_size} 个 token）"
            )
        pages = [self._free.pop() for _ in range(n)]
        for page in pages:
            assert self._refs[page] == 0
            self._refs[page] = 1
        return pages

    def free_pages(self, pages: Iterable[int]) -> None:
        """放下对这些页的持有；没人持有的页回到空闲栈。"""
        pages = list(pages)
        for page, times in Counter(pages).items():  # 先全部检查，再改
            assert self._refs[page] >= times, f"{page} 号页被多还了"
        for page in reversed(pages):  # 倒着压栈，下次按原来的顺序取出
            self._refs[page] -= 1
            if self._refs[page] == 0:
                self._free.append(page)

    def hold_pages(self, pages: Iterable[int]) -> None:
        """给已经有人持有的页再加一份持有（前缀缓存存下一个请求的页时用）。"""
        pages = list(pages)
        for page in pages:  # 先全部检查，再改
            assert self._refs[page] >= 1, f"{page} 号页是空闲页，不能加持有"
        for page in pages:
            self._refs[page] += 1

    # ---------------------------------------------------------------- 以页表为单位

    def row_pages(self, row: int) -> list[int]:
        """第 row 行按顺序用着的页（拷贝）。"""
        return list(self._rows[row])

    def share_prefix(self, row: int, pages: Sequence[int]) -> None:
        """让空行 row 从借来的 pages 开始：这一行对每页加一份持有，并写页表的开头。

        pages 是前缀缓存里命中的页，已经有人（缓存）持有。之后这一行和普通的行一样，
        free_slots 时放下的也只是这一行自己的那一份。
        """
        ps = self.page_size
        assert not self._rows[row], f"第 {row} 行已经有页了，只能给空行借用前缀"
        assert len(pages) * ps <= self.page_table.shape[1]
        self.hold_pages(pages)
        self._rows[row] = list(pages)
        slots = pages_to_slots(pages, ps)
        self.page_table[row, : len(slots)] = to_device(slots, torch.int32, self.device)

    def alloc_slots(self, reqs: Sequence[Req]) -> torch.Tensor:
        """给每个请求的位置 [cached_len, device_len) 分配槽位，写进页表的第 table_idx 行。

        要么整批都分到，要么抛 OutOfPagesError 而什么都不改。返回按 reqs 顺序拼接的
        out_loc：这一步每个 token 的 K/V 要写进的槽位（int32，在页表的设备上）。
        """
        ps = self.page_size
        plan, needed, seen = [], 0, set()
        for req in reqs:  # 第一遍：只检查、只数页，不动任何东西
            row, start, end = req.table_idx, req.cached_len, req.device_len
            pages = self._rows[row]
            assert 0 <= start <= end <= self.page_table.shape[1]
            assert len(pages) == div_ceil(start, ps), f"第 {row} 行的页与 cached_len 对不上"
            assert row not in seen, f"第 {row} 行在一批里出现两次"
            seen.add(row)
            if start % ps != 0 and end > start:  # 接着写最后一页的空位：这页必须只归自己
                assert self._refs[pages[-1]] == 1, f"{pages[-1]} 号页还被别人持有，不能往里写"
            plan.append((row, start, end))
            needed += self.pages_needed(start, end)
        if needed > len(self._free):
            raise OutOfPagesError(
                f"KV 池的页不够：这批 {len(plan)} 个请求共需要 {needed} 页，只剩 "
                f"{len(self._free)} 页空闲（共 {self.num_pages} 页，每页 {ps} 个 token）"
            )
        # 第二遍：页够了，从这里起不会再失败。槽位由这一行的页在 CPU 上算出，不读页表
        rows, positions, slots = [], [], []
        for row, start, end in plan:
            pages = self._rows[row]
            pages += self.alloc_pages(self.pages_needed(start, end))
            rows += [row] * (end - start)
            positions += range(start, end)
            slots += pages_to_slots(pages, ps, start, end)
        host = torch.tensor([rows, positions, slots], dtype=torch.int32)  # [3, T]
        # GPU 上经锁页内存异步拷过去，CPU 不等；CPU 上原样返回
        row_ids, pos_ids, out_loc = to_device(host, torch.int32, self.device).unbind(0)
        self.page_table[row_ids, pos_ids] = out_loc
        return out_loc

    def free_slots(self, row: int, end: int, *, start: int = 0) -> None:
        """放下第 row 行位置 [start, end) 所在的页：start 在页边界上，end 到这一行的末尾。

        只读 CPU 上的记录，不读页表。页表这一行的内容不清除，下一个请求会覆盖。
        """
        pages = self._rows[row]
        assert start % self.page_size == 0 and 0 <= start <= end
        assert div_ceil(end, self.page_size) == len(pages), f"第 {row} 行要还到末尾"
        first = start // self.page_size
        self.free_pages(pages[first:])
        del pages[first:]

    def __repr__(self) -> str:
        return (
            f"PageAllocator(num_pages={self.num_pages}, page_size={self.page_size}, "
            f"free={self.num_free_pages})"
        )
