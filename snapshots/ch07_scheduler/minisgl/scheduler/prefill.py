"""PrefillManager：排队的请求先到先得（FCFS），按页表行、KV 页和 token 预算决定这一步接纳谁。"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from minisgl.core import Batch, Req
from minisgl.kvcache import PageAllocator
from minisgl.utils import div_ceil, to_device

from .decode import DecodeManager
from .table import TableManager
from .utils import PendingReq


@dataclass
class PrefillAdder:
    """拼一个 prefill 批：从队头起一个个试，放不下就停（不跳过，不插队）。"""

    token_budget: int  # 这一批还能算多少个 token
    free_pages: int  # 还没被任何请求（包括正在跑的请求将来要用的）预留的页
    page_size: int
    table_manager: TableManager

    def try_add_one(self, pending: PendingReq, is_first: bool) -> Req | None:
        if self.table_manager.available_size == 0:
            return None
        # 第一个请求再长也收下，后面的要在预算之内
        if not is_first and pending.input_len > self.token_budget:
            return None
        # 最坏情况：生成到 max_tokens 为止，最后一个 token 不进 KV 池
        worst_pages = div_ceil(pending.input_len + pending.output_len - 1, self.page_size)
        if worst_pages > self.free_pages:
            return None
        self.token_budget -= pending.input_len
        self.free_pages -= worst_pages
        row = self.table_manager.allocate()
        # 提示写进 token 池的这一行；前向时按 (行, 位置) 从这里取 input_ids
        pool = self.table_manager.token_pool
        pool[row, : pending.input_len] = to_device(pending.input_ids, torch.int32, pool.device)
        return Req(input_ids=pending.input_ids, table_idx=row, cached_len=0,
                   output_len=pending.output_len, uid=pending.uid,
                   sampling_params=pending.sampling_params, cache_handle=None)


@dataclass
class PrefillManager:
    allocator: PageAllocator
    table_manager: TableManager
    decode_manager: DecodeManager
    pending_list: list[PendingReq] = field(default_factory=list)

    def add_one_req(self, pending: PendingReq) -> None:
        self.pending_list.append(pending)

    def schedule_next_batch(self, prefill_budget: int) -> Batch | None:
        if not self.pending_list:
            return None
        page_size = self.allocator.page_size
        adder = PrefillAdder(
            token_budget=prefill_budget,
            # 正在 decode 的请求将来要用的页先预留出来：接纳新请求不能让老请求半路没页
            free_pages=self.allocator.num_free_pages - self.decode_manager.inflight_pages(page_size),
            page_size=page_size,
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
