"""分页注意力后端（CPU）：隔着页表读 KV 池，不把每个请求的 K/V 先拷成连续的一块。

参考后端（sdpa.py）每一层都按页表把整批的 K/V 取成 [B, max_k, hkv, d] 的副本再交给 SDPA：
批大、上下文长时，这份副本每一步每一层都要写一遍、再读一遍，和权重一样多。这个后端把页表交给
C++ 算子（kernel/csrc/paged_attention.cpp），算子按槽位直接读池子里的那一行。

元数据全是张量、一步只算一次（plan），每一层直接用（run）：前向里不碰 Python 列表，
形状只取决于补齐后的批大小，第 18 章的图捕获可以把它们放进固定的缓冲区。
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from minisgl.kernel import load_kernels
from minisgl.kvcache import BaseKVCachePool
from minisgl.utils import is_cuda, to_device

from .base import BaseAttnBackend, BaseAttnMetadata

if TYPE_CHECKING:
    from minisgl.core import Batch


@dataclass
class PagedAttnMetadata(BaseAttnMetadata):
    """按 batch.padded_reqs 的顺序，每个请求一项；都是 int32 张量，放在 KV 池所在的设备上。"""

    rows: torch.Tensor  # [B] 请求在页表里的行
    qo_indptr: torch.Tensor  # [B + 1] 第 b 个请求的 query 是 q[qo_indptr[b]:qo_indptr[b + 1]]
    seq_lens_k: torch.Tensor  # [B] 每个请求的 key 数：缓存的前缀 + 这一步的 token


class PagedAttnBackend(BaseAttnBackend):
    def __init__(self, kvcache: BaseKVCachePool, page_table: torch.Tensor) -> None:
        if is_cuda(page_table.device):
            raise ValueError("注意力后端 paged 是 CPU 算子；GPU 上请用 torch")
        load_kernels()  # 第一次用时编译（之后从缓存加载）；编不了就在建引擎时说清楚，而不是在第一步里
        self.kvcache = kvcache
        self.page_table = page_table

    def prepare_metadata(self, batch: Batch) -> None:
        reqs = batch.padded_reqs
        num_q = [req.extend_len for req in reqs]
        indptr = [0]
        for n in num_q:
            indptr.append(indptr[-1] + n)
        # 三样拼成一个列表，建成一个张量（GPU 上就是一次拷贝，不是三次），再切成视图
        packed = to_device([req.table_idx for req in reqs] + [req.device_len for req in reqs] + indptr,
                           torch.int32, self.page_table.device)
        B = len(reqs)
        batch.attn_metadata = PagedAttnMetadata(
            rows=packed[:B], seq_lens_k=packed[B: 2 * B], qo_indptr=packed[2 * B:])

    def init_capture_graph(self, max_bs: int, max_seq_len: int) -> None:
        # 初值就是"全是占位请求"：行 = 占位行，每个请求 1 个 query、1 个 key
        kw = dict(dtype=torch.int32, device=self.page_table.device)
        self._capture = PagedAttnMetadata(
            rows=torch.full((max_bs,), self.page_table.shape[0] - 1, **kw),
            qo_indptr=torch.arange(max_bs + 1, **kw),
            seq_lens_k=torch.ones(max_bs, **kw))

    def prepare_for_capture(self, batch: Batch) -> None:
        bs, c = batch.padded_size, self._capture
        batch.attn_metadata = PagedAttnMetadata(
            rows=c.rows[:bs], qo_indptr=c.qo_indptr[: bs + 1], seq_lens_k=c.seq_lens_k[:bs])

    def prepare_for_replay(self, static: Batch, batch: Batch) -> None:
        src: PagedAttnMetadata = batch.attn_metadata
        dst: PagedAttnMetadata = static.attn_metadata
        dst.rows.copy_(src.rows)
        dst.qo_indptr.copy_(src.qo_indptr)
        dst.seq_lens_k.copy_(src.seq_lens_k)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer_id: int, batch: Batch
    ) -> torch.Tensor:
        meta: PagedAttnMetadata = batch.attn_metadata
        self.kvcache.store_kv(k, v, batch.out_loc, layer_id)
        return torch.ops.minisgl.paged_attention(
            q.contiguous(), self.kvcache.k_cache(layer_id), self.kvcache.v_cache(layer_id),
            self.page_table, meta.rows, meta.qo_indptr, meta.seq_lens_k, q.shape[-1] ** -0.5)
