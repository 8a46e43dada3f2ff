"""PrefillManager：排队的请求先到先得（FCFS），按页表行、KV 页和 token 预算决定这一步接纳谁。

页由 CacheManager 管：接纳一个请求 = 匹配前缀缓存 → 锁住命中的一段 → 按最坏情况
预留页 → 行从命中的页开始。只算没命中的那段提示。
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from minisgl.core import Batch, Req
from minisgl.utils import div_ceil, to_device

from .cache import CacheManager
from .decode import DecodeManager
from .table import TableManager
from .utils import PendingReq


@dataclass
class PrefillAdder:
    """拼一个 prefill 批：从队头起一个个试，放不下就停（不跳过，不插队）。"""

    token_budget: int  # 这一批还能算多少个 token
    reserved_pages: int  # 已经许给别人的页：在跑的请求将来要用的 + 这一批已接纳的
    cache_manager: CacheManager
    table_manager: TableManager

    def try_add_one(self, pending: PendingReq, is_first: bool) -> Req | None:
        if self.table_manager.available_size == 0:
            return None
        cm = self.cache_manager
        handle = cm.match_req(pending).cuda_handle
        extend_len = pending.input_len - handle.cached_len  # 只算没命中的那段
        # 第一个请求再长也收下，后面的要在预算之内
        if not is_first and extend_len > self.token_budget:
            return None
        # 最坏情况：生成到 max_tokens 为止，最后一个 token 不进 KV 池；命中的页已经在池里
        end = pending.input_len + pending.output_len - 1
        worst_pages = div_ceil(end, cm.page_size) - handle.cached_len // cm.page_size
        cm.lock(handle)  # 先锁再数：锁住的页不再算"能逐出"，available_size 随之变小
        if worst_pages + self.reserved_pages > cm.available_size:
            cm.unlock(handle)
            return None
        self.token_budget -= extend_len
        self.reserved_pages += worst_pages
        row = self.table_manager.allocate()
        cm.attach_prefix(row, handle)  # 这一行从命中的页开始
        # 提示写进 token 池的这一行；前向时按 (行, 位置) 从这里取 input_ids
        pool = self.table_manager.token_pool
        pool[row, : pending.input_len] = to_device(pending.input_ids, torch.int32, pool.device)
        return Req(input_ids=pending.input_ids, table_idx=row, cached_len=handle.cached_len,
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
            req = adder.try_add_one(pending, is_first=not reqs)
            if req is None:
                break
            reqs.append(req)
        if not reqs:
            return None
        self.pending_list = self.pending_list[len(reqs):]
        return Batch(reqs, "prefill")

    def abort_req(self, uid: int) -> bool:
        """还在排队的请求直接从队列里拿掉；它还没占任何资源。"""
        for i, pending in enumerate(self.pending_list):
            if pending.uid == uid:
                del self.pending_list[i]
                return True
        return False

    @property
    def runnable(self) -> bool:
        return bool(self.pending_list)
