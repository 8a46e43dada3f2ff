"""练习 013 · 把 K/V 写进池子、再按页表取回（第 4 章 KV 池、页表与 token 池）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch


def store_kv(
    k_buf: torch.Tensor,
    v_buf: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out_loc: torch.Tensor,
) -> None:
    """把新 token 的 K、V 原地写进缓冲区：第 i 个 token 写到第 out_loc[i] 行，别的行不动。

    k_buf, v_buf: [num_slots, num_kv_heads, head_dim]；k, v: [n, num_kv_heads, head_dim]；
    out_loc: 长度 n 的一维整数张量（int32 或 int64）。k、v 的形状不对时抛 ValueError。
    """
    raise NotImplementedError


def gather_kv(
    k_buf: torch.Tensor, v_buf: torch.Tensor, page_table_row: torch.Tensor, length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """按页表的一行取回位置 0 … length-1 的 K、V，各是 [length, num_kv_heads, head_dim]。

    第 pos 行来自槽位 page_table_row[pos]。length 为负数或比 page_table_row 长时抛 ValueError。
    """
    raise NotImplementedError
