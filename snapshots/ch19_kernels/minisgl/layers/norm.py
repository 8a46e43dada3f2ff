"""RMSNorm：x / sqrt(mean(x²) + eps) * weight。

两点和精度有关：平方、求均值都在 float32 里做（bf16 只有 8 位尾数，直接平方求和误差很大），
最后再转回输入的 dtype；乘 weight 的时机和 Hugging Face 一致（先转回、再乘），
这样 float32 下逐位对得上，低精度下也和 HF 一样舍入。
use_cpp_norms 之后改走 C++ 算子（kernel/csrc/rms_norm.cpp）：一行一趟，误差在 float32 的最后几位。
"""

from __future__ import annotations

import torch

from .base import BaseOP


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    dtype = x.dtype
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)
    return weight * x32.to(dtype)


class RMSNorm(BaseOP):
    """对最后一维做 RMSNorm。Qwen3 的 q_norm / k_norm 也是它，只是作用在每个头上。"""

    def __init__(self, size: int, eps: float) -> None:
        self.eps = eps
        self.weight = torch.empty(size)
        self._cpp = False  # use_cpp_norms 打开：走 torch.ops.minisgl.rms_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._cpp:
            return torch.ops.minisgl.rms_norm(x, self.weight, self.eps)
        return rms_norm(x, self.weight, self.eps)


class RMSNormFused(RMSNorm):
    """带残差相加的 RMSNorm：一个解码层里"加残差、再归一化"总是成对出现。

    forward(x, residual) 返回 (norm(x + residual), x + residual)；第一次调用 residual=None，
    残差就是 x 本身。把加法并进来，一层少一次读写整个隐状态（CPU 上 use_cpp_norms 之后由 C++ 的
    add_rms_norm 一趟做完；其余情况是 torch 的几个算子，编译时 inductor 会把它们融合）。
    """

    def forward(  # type: ignore[override]
        self, x: torch.Tensor, residual: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if residual is None:
            return super().forward(x), x
        if self._cpp:  # 加残差和归一化在 C++ 里一趟做完
            out, x = torch.ops.minisgl.add_rms_norm(x, residual, self.weight, self.eps)
            return out, x
        x = x + residual
        return rms_norm(x, self.weight, self.eps), x


def use_cpp_norms(model: BaseOP) -> int:
    """让模型里每个 RMSNorm（含 Qwen3 的 q_norm、k_norm）改用 C++ 算子；返回改了几个。"""
    count = 0
    if isinstance(model, RMSNorm):
        model._cpp = True
        count += 1
    for _, child in model.named_children():
        if isinstance(child, BaseOP):
            count += use_cpp_norms(child)
    return count
