"""练习 007 · 旋转位置编码 RoPE —— 参考答案。"""

from __future__ import annotations

import torch


def rope_cache(head_dim: int, max_position: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    if head_dim <= 0 or head_dim % 2 != 0:
        raise ValueError(f"head_dim 必须是正的偶数（两两成对旋转），现在是 {head_dim}")
    if max_position <= 0:
        raise ValueError(f"max_position 必须是正数，现在是 {max_position}")
    # θ_j = base ** (-2j / D)：arange(0, D, 2) 正好是 2j
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(max_position, dtype=torch.float32), inv_freq)  # [P, D/2]
    return angles.cos(), angles.sin()


def _rotate(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    h = x.float()
    x1, x2 = h[..., :half], h[..., half:]  # rotate-half：第 j 维和第 j + D/2 维是一对
    out = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
    return out.to(x.dtype)


def apply_rope(
    positions: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    num_tokens = positions.shape[0]
    if positions.dim() != 1 or q.shape[0] != num_tokens or k.shape[0] != num_tokens:
        raise ValueError(
            f"positions {tuple(positions.shape)}、q {tuple(q.shape)}、k {tuple(k.shape)} 的 token 数对不上"
        )
    if q.shape[-1] != 2 * cos.shape[1] or k.shape[-1] != 2 * cos.shape[1]:
        raise ValueError(
            f"head_dim 应该是 {2 * cos.shape[1]}，q 是 {q.shape[-1]}、k 是 {k.shape[-1]}"
        )
    if num_tokens and (int(positions.min()) < 0 or int(positions.max()) >= cos.shape[0]):
        raise ValueError(f"positions 必须在 [0, {cos.shape[0]}) 里，现在是 {positions.tolist()}")
    c = cos[positions][:, None, :]  # [T, 1, D/2]：每一行查自己位置的那一行，所有头共用
    s = sin[positions][:, None, :]
    return _rotate(q, c, s), _rotate(k, c, s)
