"""PrefillManager：排队的请求先到先得（FCFS），按页表行、KV 页和 token 预算决定这一步接纳谁。

页由 CacheManager 管：接纳一个请求 = 匹配前缀缓存 → 锁住命中的一段 → 按最坏情况
预留页 → 行从命中的页开始。只算没命中的那段提示。

一步最多算 token_budget 个提示 token：收到预算不够的请求，就只算一块（chunk），
它变成 ChunkedReq，下一步回到队首接着算。所以一批里只有最后一个请求可能被切开。
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from minisgl.core import Batch, Req
from minisgl.kvcache import BaseCacheHandle
from minisgl.utils import div_ceil, to_device

from .cache import CacheManager
from .decode import DecodeManager
from .table import TableManager
from .utils import PendingReq


class ChunkedReq(Req):
    """提示只算了一块的请求。最后一个位置不是提示的结尾，那里的 logits 不给出输出 token：
    调度器丢掉它采样出的 token，不把它放进 decode，也不回报给用户。"""

    def append_host(self, next_token) -> None:
        raise AssertionError(f"{self!r} 的提示还没算完，不该有输出 token")

    @property
    def can_decode(self) -> bool:
        return False  # 不进 decode 批：它还在排队等下一块


@dataclass
class PrefillAdder:
    """拼一个 prefill 批：从队头起一个个试，放不下就停（不跳过，不插队）。"""

    token_budget: int  # 这一批还能算多少个 token
    reserved_pages: int  # 已经许给别人的页：在跑的请求将来要用的 + 这一批已接纳的
    cache_manager: CacheManager
    table_manager: TableManager

    def _worst_pages(self, pending: PendingReq, cached_len: int) -> int:
        """从 cached_len 起，最坏情况（生成到 max_tokens，最后一个 token 不进 KV 池）还要几页。"""
        ps = self.cache_manager.page_size
        end = pending.input_len + pending.output_len - 1
        return div_ceil(end, ps) - div_ceil(cached_len, ps)

    def _admit(self, pending: PendingReq) -> tuple[int, BaseCacheHandle] | None:
        """新请求：匹配前缀、锁住、按最坏情况预留页，占一行，把整段提示写进 token 池。"""
        if self.table_manager.available_size == 0:
            return None
        cm = self.cache_manager
        handle = cm.match_req(pending).cuda_handle
        worst_pages = self._worst_pages(pending, handle.cached_len)  # 命中的页已经在池里
        cm.lock(handle)  # 先锁再数：锁住的页不再算"能逐出"，available_size 随之变小
        if worst_pages + self.reserved_pages > cm.available_size:
            cm.unlock(handle)
            return None
        self.reserved_pages += worst_pages
        row = self.table_manager.allocate()
        cm.attach_prefix(row, handle)  # 这一行从命中的页开始
        # 整段提示一次写进 token 池的这一行；每一块前向时按 (行, 位置) 取自己那一段
        pool = self.table_manager.token_pool
        pool[row, : pending.input_len] = to_device(pending.input_ids, torch.int32, pool.device)
        return row, handle

    def try_add_one(self, pending: PendingReq) -> Req | None:
        if self.token_budget <= 0:
            return None
        if (last := pending.chunked_req) is not None:
            # 接着算下一块：行、锁和页在它第一次被接纳时就预留了，这里不再检查，只记进账里
            row, handle, cached_len = last.table_idx, last.cache_handle, last.cached_len
            self.reserved_pages += self._worst_pages(pending, cached_len)
            assert self.reserved_pages <= self.cache_manager.available_size, "分块请求预留的页不见了"
        elif (admitted := self._admit(pending)) is not None:
            row, handle = admitted
            cached_len = handle.cached_len
        else:
            return None
        chunk = min(self.token_budget, pending.input_len - cached_len)  # 只算没命中的那段
        self.token_budget -= chunk
        end = cached_len + chunk
        cls = ChunkedReq if end < pending.input_len else Req  # 预算不够整段：只算一块
        return cls(input_ids=pending.input_ids[:end], table_idx=row, cached_len=cached_len,
                   output_len=pending.output_len, uid=pending.uid,
                   sampling_params=pending.sampling_params, cache_handle=handle)


@dataclass
class PrefillManager:
    cache_manager: CacheManager
    table_manager: TableManager
    decode_manager: DecodeManager
    pending_list: list[PendingReq] = field(default_factory=list)

    def add_one_req(self, pending: PendingReq) -> None:
        self.pending_list.append(pending)

    def schedule_next_batch(self, prefill_budget: int) -> Batch | None:
        if not self.pending_list:
            return None
        adder = PrefillAdder(
            token_budget=prefill_budget,
            # 正在 decode 的请求将来要用的页先预留出来：接纳新请求不能让老请求半路没页
            reserved_pages=self.decode_manager.inflight_pages(self.cache_manager.page_size),
            cache_manager=self.cache_manager,
            table_manager=self.table_manager,
        )
        reqs: list[Req] = []
        for pending in self.pending_list:
            req = adder.try_add_one(pending)
            if req is None:
                break
            reqs.append(req)
            pending.chunked_req = req if isinstance(req, ChunkedReq) else None
        if not reqs:
            return None
        # 算完的出队；被切开的（只可能是最后一个）留在队首，下一步接着算
        done = len(reqs) - isinstance(reqs[-1], ChunkedReq)
        self.pending_list = self.pending_list[done:]
        return Batch(reqs, "prefill")

    def abort_req(self, uid: int) -> PendingReq | None:
        """从队列里拿掉一个请求并返回它。分块算到一半的请求占着行和页，由调用者释放。"""
        for i, pending in enumerate(self.pending_list):
            if pending.uid == uid:
                return self.pending_list.pop(i)
        return None

    @property
    def runnable(self) -> bool:
        return bool(self.pending_list)
