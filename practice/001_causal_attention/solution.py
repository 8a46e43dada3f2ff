"""练习 001 · 右下对齐的因果掩码与带缓存的注意力 —— 参考答案。"""

from __future__ import annotations

import torch


def causal_mask(num_queries: int, num_keys: int) -> torch.Tensor:
    # 修复：按绝对位置比较。新 token 排在缓存里的 start 个 token 之后，
    # 第 i 个 query 的位置是 start + i，能看见位置 <= start + i 的 key——右下角对齐的三角。
    # 等价的写法：torch.ones(num_queries, num_keys, dtype=torch.bool).tril(diagonal=start)
    start = num_keys - num_queries
    q_pos = torch.arange(start, num_keys)[:, None]
    k_pos = torch.arange(num_keys)[None, :]
    return k_pos <= q_pos


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    n, num_heads, head_dim = q.shape
    m, num_kv_heads, _ = k.shape
    group = num_heads // num_kv_heads
    # GQA：相邻的 group 个 query 头共用一个 KV 头，query 头 h 对到 KV 头 h // group
    k = k.repeat_interleave(group, dim=1)  # [m, Hq, D]
    v = v.repeat_interleave(group, dim=1)

    scores = torch.einsum("nhd,mhd->hnm", q, k) / head_dim**0.5  # [Hq, n, m]
    scores = scores.masked_fill(~causal_mask(n, m), float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v.transpose(0, 1)  # [Hq, n, D]
    return out.transpose(0, 1)  # [n, Hq, D]
