"""练习 031 · 分块算 prefill 的注意力：结果不变，分数矩阵变小（第 10 章 分块 prefill）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

from collections.abc import Callable

import torch

# attend(q [m, Hq, D], k [t, Hkv, D], v [t, Hkv, D], mask [m, t] bool) -> [m, Hq, D]
Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def chunked_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk: int, attend: Attend
) -> torch.Tensor:
    """每 chunk 个 query 调用一次 attend，只给它看得见的 key [0, e)，掩码右下对齐；拼起各块的输出。"""
    raise NotImplementedError


def peak_score_elements(n: int, chunk: int, num_heads: int) -> int:
    """分块以后，一次 attend 里分数矩阵（所有头加起来）元素个数的最大值。"""
    raise NotImplementedError
