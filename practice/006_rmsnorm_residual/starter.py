"""练习 006 · 带残差的 RMSNorm（第 2 章 算子层）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm：x / sqrt(mean(x ** 2, 最后一维) + eps) * weight。

    x: [..., H]，weight: [H]。在 float32 里算（包括乘 weight），返回形状、dtype 都和 x 相同的新张量。
    weight 的形状不是 (H,) 时抛 ValueError。不改动传进来的张量。
    """
    raise NotImplementedError


def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """先把子层输出加回残差流，再做 RMSNorm：返回 (normed, new_residual)。

    residual 为 None 时 new_residual = x，否则 new_residual = x + residual（dtype 和 x 相同）；
    normed = rms_norm(new_residual, weight, eps)。residual 的形状和 x 不同时抛 ValueError。
    """
    raise NotImplementedError
