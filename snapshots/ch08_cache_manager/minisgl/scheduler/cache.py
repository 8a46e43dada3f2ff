"""CacheManager：调度器一侧唯一管 KV 池页面的地方。

它把 kvcache 的 PageAllocator（哪些页空闲、每页几方持有）和一个前缀缓存（哪些前缀的 K/V
已经在池里）组合在一起，对调度器只露出几件事::

    match_req      新请求的开头在缓存里命中了多少        （接纳时）
    lock / unlock  锁住命中的那一段，它就不会被逐出      （接纳时 / 请求结束时）
    attach_prefix  让请求的行从命中的页开始              （接纳时）
    allocate_paged 给一批请求分配这一步要写的槽位        （每一步前向之前）
    cache_req      把算好的前缀交给缓存；请求结束时还页  （prefill 之后 / 请求结束时）
    check_integrity 空闲时核对账目：空闲页 + 缓存页 == 总页数

页的归属只有一条规则：谁指着一页，谁就持有它一份。请求的行持有自己行里的每一页，
前缀缓存持有它存下的每一页；页只在最后一份持有被放下时才回到空闲栈。锁只加在有行
指着的缓存页上，所以 available_size（空闲页 + 没锁住的缓存页）= 总页数 - 各行指着的页。
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch

from minisgl.kvcache import (BaseCacheHandle, MatchResult, PageAllocator, create_prefix_cache,
                             pages_to_slots, slots_to_pages)

if TYPE_CHECKING:
    from minisgl.core import Req

    from .utils import PendingReq


class CacheManager:
    """KV 池的页：分配、借用前缀、交给前缀缓存、逐出、核对。"""

    def __init__(
        self, num_pages: int, page_size: int, page_table: torch.Tensor, cache_type: str
    ) -> None:
        self.num_pages = num_pages
        self.page_size = page_size
        self.page_table = page_table
        self.allocator = PageAllocator(num_pages, page_size, page_table)
        self.prefix_cache = create_prefix_cache(cache_type, page_size)

    # ---------------------------------------------------------------- 接纳

    def match_req(self, req: PendingReq) -> MatchResult:
        """新请求的提示在缓存里命中的最长前缀。

        最后一个提示 token 不参与匹配：它必须在这一步算一遍，才有 logits 采样下一个 token。
        """
        assert len(req.input_ids) >= 1
        return self.prefix_cache.match_prefix(req.input_ids[:-1])

    def lock(self, handle: BaseCacheHandle) -> None:
        self.prefix_cache.lock_handle(handle, unlock=False)

    def unlock(self, handle: BaseCacheHandle) -> None:
        self.prefix_cache.lock_handle(handle, unlock=True)

    def attach_prefix(self, table_idx: int, handle: BaseCacheHandle) -> None:
        """让第 table_idx 行从命中的页开始：这一行对这些页各加一份持有，并写进页表。"""
        if handle.cached_len == 0:
            return
        pages = slots_to_pages(handle.get_matched_indices(), self.page_size)
        self.allocator.share_prefix(table_idx, pages)

    @property
    def available_size(self) -> int:
        """现在最多能拿出多少页：空闲页，加上缓存里没被锁住、可以逐出的页。"""
        evictable = self.prefix_cache.size_info.evictable_size
        return self.allocator.num_free_pages + evictable // self.page_size

    # ---------------------------------------------------------------- 每一步

    def allocate_paged(self, reqs: Sequence[Req]) -> torch.Tensor:
        """给每个请求的位置 [cached_len, device_len) 分配槽位，返回 out_loc。

        空闲页不够时先从前缀缓存逐出差额。接纳时预留过最坏情况，所以逐出之后一定够；
        万一不够（接纳的账算错了），alloc_slots 抛 OutOfPagesError，页表不变。
        """
        needed = sum(self.allocator.pages_needed(r.cached_len, r.device_len) for r in reqs)
        short = needed - self.allocator.num_free_pages
        if short > 0:
            evictable = self.prefix_cache.size_info.evictable_size // self.page_size
            self._evict(min(short, evictable))
        return self.allocator.alloc_slots(reqs)

    def cache_req(self, req: Req, *, finished: bool) -> None:
        """把请求已经算好的前缀 [0, cached_len) 交给前缀缓存。

        finished=False（一次 prefill 之后）：换成覆盖新前缀的句柄并锁住，这一行的页照旧用。
        finished=True（请求结束）：解锁，这一行放下它持有的所有页。

        按页看这一行（old = 接纳时命中的句柄，already/new 来自 insert_prefix）::

            [0, old)         借来的页：缓存和这一行各持有一份
            [old, already)   别的请求在此期间存进缓存的重复内容：缓存留着它自己那份，
                             这一行的页不交出去，结束时随行放下
            [already, new)   新存进缓存的页：缓存加一份持有
            [new, 末尾)       不满一页的尾巴和以后 decode 的页：只归这一行

        锁只加在这一行指着的页上。请求没结束、而 [old, already) 不为空时，新句柄会锁住
        缓存的那份重复页：这一行没指着它们，它们却不再能逐出，available_size 凭空少了
        这么多页，而接纳时谁也没给它们预留。所以这种时候先不交，留着 old，等结束时再交。
        """
        ps, row, old = self.page_size, req.table_idx, req.cache_handle
        assert old is not None, f"{req!r} 没有缓存句柄：接纳时应当 match_req 并 lock"
        pages = self.allocator.row_pages(row)
        assert req.cached_len <= min(len(req.input_ids), len(pages) * ps)
        ids = req.input_ids[: req.cached_len]
        if not finished and self.prefix_cache.match_prefix(ids).cuda_handle.cached_len > old.cached_len:
            return  # 别的请求已经存过其中一段：结束时再交（见上面最后一段）
        slots = torch.tensor(pages_to_slots(pages, ps, 0, req.cached_len), dtype=torch.int32)
        already, new = self.prefix_cache.insert_prefix(ids, slots)
        assert old.cached_len <= already <= new.cached_len <= req.cached_len
        assert finished or already == old.cached_len
        assert already % ps == 0 and new.cached_len % ps == 0
        self.allocator.hold_pages(pages[already // ps : new.cached_len // ps])
        self.unlock(old)  # 插入做完再解锁：插入期间旧的一段不能被逐出
        if finished:
            req.cache_handle = None
            self.allocator.free_slots(row, len(pages) * ps)  # 只放下这一行自己的那一份
        else:
            self.lock(new)
            req.cache_handle = new

    # ---------------------------------------------------------------- 空闲时

    def check_integrity(self) -> None:
        """空闲时（没有请求在跑）核对账目，对不上就抛 RuntimeError。

        这时没有任何一行持有页，所以每一页要么空闲，要么只被前缀缓存持有一份。
        """
        self.prefix_cache.check_integrity()
        info = self.prefix_cache.size_info
        cached = info.total_size // self.page_size
        free = self.allocator.num_free_pages
        if info.protected_size != 0:
            raise RuntimeError(
                f"KV 页的记账出错：没有请求在跑，前缀缓存里却还有 {info.protected_size} 个 "
                f"token 被锁住（有句柄没有解锁）"
            )
        if free + cached != self.num_pages:
            raise RuntimeError(
                f"KV 页的记账出错：空闲 {free} 页 + 前缀缓存 {cached} 页 = {free + cached} 页，"
                f"应当等于总页数 {self.num_pages}（有 {self.num_pages - free - cached} 页没有还回来）"
            )
        holds = self.allocator.num_holds
        if holds != cached:
            raise RuntimeError(
                f"KV 页的记账出错：前缀缓存的 {cached} 页上共有 {holds} 份持有，"
                f"多出的 {holds - cached} 份是已经结束的请求没有放下的"
            )

    # ---------------------------------------------------------------- 内部

    def _evict(self, num_pages: int) -> None:
        """让前缀缓存逐出至少 num_pages 页，放下缓存对它们的那一份持有。"""
        free_before = self.allocator.num_free_pages
        evicted = slots_to_pages(self.prefix_cache.evict(num_pages * self.page_size), self.page_size)
        self.allocator.free_pages(evicted)
        # 没锁住的页没有行在借用（借用的都锁着），所以缓存一放下，它们就回到了空闲栈
        assert self.allocator.num_free_pages >= free_before + num_pages, "逐出的页还有别人持有"

    def __repr__(self) -> str:
        return (
            f"CacheManager(num_pages={self.num_pages}, page_size={self.page_size}, "
            f"free={self.allocator.num_free_pages}, cache={self.prefix_cache.size_info})"
        )
