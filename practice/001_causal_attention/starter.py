"""练习 001 · 右下对齐的因果掩码与带缓存的注意力（第 0 章 架构全景与最小引擎）

这是一道“找 bug”：下面的实现没有缓存时（query 和 key 一样多）完全正确，有缓存时却算错了。
找出原因、修好以后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch


def causal_mask(num_queries: int, num_keys: int) -> torch.Tensor:
    """因果掩码，形状 (num_queries, num_keys)，dtype torch.bool，True 表示能看见。

    这一步的 num_queries 个新 token 排在缓存里已有的 num_keys - num_queries 个 token 之后：
    第 i 个 query 的绝对位置是 num_keys - num_queries + i，只能看见位置不超过它的 key。
    """
    return torch.ones(num_queries, num_keys, dtype=torch.bool).tril()


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """带缓存的因果注意力（GQA）。

    q: [n, Hq, D]，这一步新来的 n 个 token 的 query；
    k, v: [m, Hkv, D]，缓存里已有的 m - n 个 token 加上这一步的 n 个（n <= m）。
    query 头 h 用 KV 头 h // (Hq // Hkv)。返回 [n, Hq, D]，dtype 与 q 相同。
    """
    n, num_heads, head_dim = q.shape
    m, num_kv_heads, _ = k.shape
    group = num_heads // num_kv_heads
    k = k.repeat_interleave(group, dim=1)  # [m, Hq, D]：每个 KV 头复制 group 份，和 query 头对齐
    v = v.repeat_interleave(group, dim=1)

    scores = torch.einsum("nhd,mhd->hnm", q, k) / head_dim**0.5  # [Hq, n, m]
    scores = scores.masked_fill(~causal_mask(n, m), float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v.transpose(0, 1)  # [Hq, n, D]
    return out.transpose(0, 1)  # [n, Hq, D]
