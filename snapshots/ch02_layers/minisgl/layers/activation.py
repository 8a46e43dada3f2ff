"""门控 MLP 的激活：SiLU(gate) * up。"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """x 的最后一维前一半是 gate、后一半是 up（gate_up_proj 合并输出的布局），返回 silu(gate) * up。"""
    half = x.shape[-1] // 2
    assert x.shape[-1] == 2 * half, x.shape
    return F.silu(x[..., :half]) * x[..., half:]
