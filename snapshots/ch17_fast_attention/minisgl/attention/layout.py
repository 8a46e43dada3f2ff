"""GPU 上两种常用注意力库要的元数据，从我们的页表算出来：同样的信息，不同的排法。

我们的页表一行一个请求、一列一个 token（值是槽位 = 页号 × page_size + 页内偏移）。
- FlashInfer（上游的 fi 后端）要“不规则”的页列表：全部请求的页号首尾相接（kv_indices），
  kv_indptr 标出每个请求从哪里开始，last_page_len 说最后一页用了几个槽位；query 也一样（qo_indptr）。
- FlashAttention 3（上游的 fa 后端）要矩形的“块表”：[B, 最多几页]，每行是这个请求的页号，
  再加上每个请求的 key 数（cache_seqlens）。
这两个函数只用来打印和测试（本章的 main 把它们和 paged 后端的元数据放在一起看）；CPU 上不调用这两个库。
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from minisgl.core import Req


def _cumsum(values: list[int]) -> torch.Tensor:
    out = [0]
    for v in values:
        out.append(out[-1] + v)
    return torch.tensor(out, dtype=torch.int32)


def _page_ids(page_table: torch.Tensor, req: Req, page_size: int) -> torch.Tensor:
    """这个请求按顺序用到的页：每页第一个 token 的槽位 ÷ page_size。"""
    return (page_table[req.table_idx, : req.device_len: page_size] // page_size).to(torch.int32)


def flashinfer_layout(page_table: torch.Tensor, reqs: list[Req], page_size: int) -> dict[str, torch.Tensor]:
    pages = [_page_ids(page_table, r, page_size) for r in reqs]
    return {
        "qo_indptr": _cumsum([r.extend_len for r in reqs]),
        "kv_indptr": _cumsum([len(p) for p in pages]),
        "kv_indices": torch.cat(pages),
        "last_page_len": torch.tensor([r.device_len - (len(p) - 1) * page_size for r, p in zip(reqs, pages)],
                                      dtype=torch.int32),
    }


def fa3_layout(page_table: torch.Tensor, reqs: list[Req], page_size: int) -> dict[str, torch.Tensor]:
    pages = [_page_ids(page_table, r, page_size) for r in reqs]
    block_table = torch.zeros(len(reqs), max(len(p) for p in pages), dtype=torch.int32)  # 补的 0 不会被读
    for i, p in enumerate(pages):
        block_table[i, : len(p)] = p
    return {
        "page_table": block_table,
        "cache_seqlens": torch.tensor([r.device_len for r in reqs], dtype=torch.int32),
        "cu_seqlens_q": _cumsum([r.extend_len for r in reqs]),
    }
