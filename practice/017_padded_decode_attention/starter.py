"""练习 017 · 一次算完一批 decode 的注意力（第 5 章 注意力后端）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch


def gather_padded(
    k_buf: torch.Tensor,
    v_buf: torch.Tensor,
    page_table: torch.Tensor,
    table_idx: list[int],
    seq_lens: list[int],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """把每个请求的 K/V 按页表取出、补齐到 L = max(seq_lens)。

    返回 (k, v, valid)：k, v 是 [B, L, Hkv, D]，k[b, j] 在 j < seq_lens[b] 时是请求 b 第 j 个 token 的 K
    （后面补的内容随意）；valid 是 [B, L] 的 bool 张量，valid[b, j] = j < seq_lens[b]。
    """
    raise NotImplementedError


def padded_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, valid: torch.Tensor
) -> torch.Tensor:
    """补齐的 K/V 上的 decode 注意力，整批一次算完（只调用一次 SDPA，或一次批量 einsum）。

    q: [B, Hq, D]；k, v: [B, L, Hkv, D]；valid: [B, L]，False 的位置不参与。
    分数乘 D ** -0.5，query 头 h 用 KV 头 h // (Hq // Hkv)。返回 [B, Hq, D]，dtype 与 q 相同。
    """
    raise NotImplementedError


def decode_attention(
    q: torch.Tensor,
    k_buf: torch.Tensor,
    v_buf: torch.Tensor,
    page_table: torch.Tensor,
    table_idx: list[int],
    seq_lens: list[int],
) -> torch.Tensor:
    """一批 decode 的注意力：gather_padded 之后 padded_attention。

    q: [B, Hq, D]；k_buf, v_buf: [num_slots, Hkv, D]；请求 b 的第 pos 个 token 在槽位
    page_table[table_idx[b], pos]，共 seq_lens[b] 个。参数对不上时抛 ValueError（见题目）。
    """
    raise NotImplementedError
