"""练习 017 · 一次算完一批 decode 的注意力 —— 参考答案。"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def gather_padded(
    k_buf: torch.Tensor,
    v_buf: torch.Tensor,
    page_table: torch.Tensor,
    table_idx: list[int],
    seq_lens: list[int],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    L = max(seq_lens)
    # [B, L] 的槽位表：短请求后面那些槽位没有意义，读出来的是旧数据，靠 valid 挡住
    rows = page_table[torch.tensor(table_idx), :L]
    valid = torch.arange(L)[None, :] < torch.tensor(seq_lens)[:, None]
    return k_buf[rows], v_buf[rows], valid


def padded_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, valid: torch.Tensor
) -> torch.Tensor:
    group = q.shape[1] // k.shape[2]
    k = k.repeat_interleave(group, dim=2).transpose(1, 2)  # [B, Hq, L, D]
    v = v.repeat_interleave(group, dim=2).transpose(1, 2)
    out = F.scaled_dot_product_attention(
        q[:, :, None, :],  # [B, Hq, 1, D]：每个请求一个 query
        k,
        v,
        attn_mask=valid[:, None, None, :],  # [B, 1, 1, L]：补出来的 key 看不见
    )
    return out[:, :, 0, :]


def decode_attention(
    q: torch.Tensor,
    k_buf: torch.Tensor,
    v_buf: torch.Tensor,
    page_table: torch.Tensor,
    table_idx: list[int],
    seq_lens: list[int],
) -> torch.Tensor:
    B = q.shape[0]
    if len(table_idx) != B or len(seq_lens) != B:
        raise ValueError(
            f"q 有 {B} 行，table_idx 有 {len(table_idx)} 个，seq_lens 有 {len(seq_lens)} 个：应该一样多"
        )
    for b, n in enumerate(seq_lens):
        if not (1 <= n <= page_table.shape[1]):
            raise ValueError(
                f"seq_lens[{b}] = {n}，应该在 [1, {page_table.shape[1]}] 里（页表的列数）"
            )
    if q.shape[1] % k_buf.shape[1] != 0:
        raise ValueError(
            f"query 头数 {q.shape[1]} 不是 KV 头数 {k_buf.shape[1]} 的倍数"
        )
    return padded_attention(
        q, *gather_padded(k_buf, v_buf, page_table, table_idx, seq_lens)
    )
