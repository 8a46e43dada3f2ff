"""练习 031 · 分块算 prefill 的注意力 —— 参考答案。"""

from __future__ import annotations

from collections.abc import Callable

import torch

Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def _chunks(n: int, chunk: int) -> list[tuple[int, int]]:
    if chunk < 1 or n < 1:
        raise ValueError(f"要求 n ≥ 1、chunk ≥ 1，收到 n={n}、chunk={chunk}")
    return [(s, min(s + chunk, n)) for s in range(0, n, chunk)]


def chunked_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk: int, attend: Attend
) -> torch.Tensor:
    n = q.shape[0]
    if k.shape[0] != n or v.shape[0] != n:
        raise ValueError(f"q 有 {n} 行，k 有 {k.shape[0]} 行，v 有 {v.shape[0]} 行")
    outputs = []
    for s, e in _chunks(n, chunk):
        q_pos = torch.arange(s, e)
        k_pos = torch.arange(e)  # 前面各块已经在缓存里的 key，加上这一块自己的
        mask = k_pos[None, :] <= q_pos[:, None]  # 右下对齐
        outputs.append(attend(q[s:e], k[:e], v[:e], mask))
    return torch.cat(outputs)


def peak_score_elements(n: int, chunk: int, num_heads: int) -> int:
    return num_heads * max((e - s) * e for s, e in _chunks(n, chunk))
