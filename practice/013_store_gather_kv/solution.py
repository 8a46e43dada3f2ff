"""练习 013 · 把 K/V 写进池子、再按页表取回 —— 参考答案。"""

from __future__ import annotations

import torch


def store_kv(
    k_buf: torch.Tensor,
    v_buf: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out_loc: torch.Tensor,
) -> None:
    expected = (out_loc.shape[0], *k_buf.shape[1:])
    if tuple(k.shape) != expected or tuple(v.shape) != expected:
        raise ValueError(
            f"k、v 的形状应该是 {expected}（out_loc 有 {out_loc.shape[0]} 个槽位），"
            f"现在是 {tuple(k.shape)} 和 {tuple(v.shape)}"
        )
    # 整数张量做下标、放在等号左边：原地写进这几行（等价于 index_put_）
    k_buf[out_loc] = k
    v_buf[out_loc] = v


def gather_kv(
    k_buf: torch.Tensor, v_buf: torch.Tensor, page_table_row: torch.Tensor, length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    if not (0 <= length <= page_table_row.shape[0]):
        raise ValueError(
            f"length 必须在 [0, {page_table_row.shape[0]}] 里（页表这一行的长度），现在是 {length}"
        )
    slots = page_table_row[:length]  # 位置 0 … length-1 的槽位，不连续
    return k_buf[slots], v_buf[slots]  # 高级索引：取出来的是拷贝
