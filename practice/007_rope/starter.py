"""练习 007 · 旋转位置编码 RoPE（第 2 章 算子层）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch


def rope_cache(head_dim: int, max_position: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """预先算好的 cos / sin 表：形状都是 [max_position, head_dim // 2]，dtype torch.float32。

    cos[p, j] = cos(p * θ_j)，sin[p, j] = sin(p * θ_j)，θ_j = base ** (-2j / head_dim)。
    head_dim 是奇数或不是正数、max_position 不是正数时抛 ValueError。
    """
    raise NotImplementedError


def apply_rope(
    positions: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """按每一行自己的位置，对 q [T, H, D] 和 k [T, Hkv, D] 做 rotate-half（neox 风格）的 RoPE。

    第 j 维和第 j + D/2 维是一对，按角度 positions[i] * θ_j 旋转。在 float32 里算，
    返回 (q_rot, k_rot)，形状、dtype 分别和 q、k 相同；不改动传进来的张量。
    长度 / 维度对不上，或 positions 不在 [0, max_position) 里时抛 ValueError。
    """
    raise NotImplementedError
