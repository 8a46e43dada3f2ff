"""练习 006 · 带残差的 RMSNorm —— 参考答案。"""

from __future__ import annotations

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if tuple(weight.shape) != (x.shape[-1],):
        raise ValueError(
            f"weight 的形状应该是 ({x.shape[-1]},)（x 的最后一维），现在是 {tuple(weight.shape)}"
        )
    h = x.float()  # bf16 / fp16 里平方会溢出或丢精度：先转 float32
    variance = h.pow(2).mean(dim=-1, keepdim=True)  # [..., 1]
    h = h * torch.rsqrt(variance + eps)  # eps 在根号里面
    return (h * weight.float()).to(x.dtype)


def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    if residual is None:
        new_residual = x  # 第一个 norm：残差流就是 x 本身
    else:
        if residual.shape != x.shape:
            raise ValueError(
                f"residual 的形状 {tuple(residual.shape)} 和 x 的形状 {tuple(x.shape)} 不同"
            )
        new_residual = x + residual  # 新的残差流是“加完”的值，不是 norm 之后的值
    return rms_norm(new_residual, weight, eps), new_residual
