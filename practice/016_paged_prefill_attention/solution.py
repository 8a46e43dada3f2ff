"""练习 016 · 带缓存前缀的分页注意力（prefill）—— 参考答案。"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _check_arguments(q, k_buf, page_table, table_idx, cached_lens, extend_lens) -> None:
    if not (len(table_idx) == len(cached_lens) == len(extend_lens)):
        raise ValueError(
            f"table_idx、cached_lens、extend_lens 的长度应该一样，现在是 "
            f"{len(table_idx)}、{len(cached_lens)}、{len(extend_lens)}"
        )
    if sum(extend_lens) != q.shape[0]:
        raise ValueError(
            f"q 有 {q.shape[0]} 行，extend_lens 加起来却是 {sum(extend_lens)}"
        )
    if q.shape[1] % k_buf.shape[1] != 0:
        raise ValueError(
            f"query 头数 {q.shape[1]} 不是 KV 头数 {k_buf.shape[1]} 的倍数"
        )
    for i, (cached, ext) in enumerate(zip(cached_lens, extend_lens)):
        if cached < 0 or ext < 1:
            raise ValueError(
                f"第 {i} 个请求：要求 cached_len >= 0、extend_len >= 1，现在是 {cached}、{ext}"
            )
        if cached + ext > page_table.shape[1]:
            raise ValueError(
                f"第 {i} 个请求有 {cached + ext} 个 token，页表只有 {page_table.shape[1]} 列"
            )


def paged_prefill_attention(
    q: torch.Tensor,
    k_buf: torch.Tensor,
    v_buf: torch.Tensor,
    page_table: torch.Tensor,
    table_idx: list[int],
    cached_lens: list[int],
    extend_lens: list[int],
) -> torch.Tensor:
    _check_arguments(q, k_buf, page_table, table_idx, cached_lens, extend_lens)
    group = q.shape[1] // k_buf.shape[1]
    out = torch.empty_like(q)
    start = 0
    for row, cached, ext in zip(table_idx, cached_lens, extend_lens):
        total = cached + ext
        slots = page_table[row, :total]  # 这个请求位置 0 … total-1 的槽位（不连续）
        k = k_buf[slots].repeat_interleave(group, dim=1)  # [total, Hq, D]
        v = v_buf[slots].repeat_interleave(group, dim=1)
        # 右下角对齐：第 i 个新 token 的位置是 cached + i，看得见位置 <= cached + i 的 key
        q_pos = torch.arange(cached, total)[:, None]
        k_pos = torch.arange(total)[None, :]
        mask = k_pos <= q_pos  # [ext, total]
        o = F.scaled_dot_product_attention(
            q[start : start + ext].transpose(0, 1),  # [Hq, ext, D]
            k.transpose(0, 1),  # [Hq, total, D]
            v.transpose(0, 1),
            attn_mask=mask,
        )
        out[start : start + ext] = o.transpose(0, 1)
        start += ext
    return out
