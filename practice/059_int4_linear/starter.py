"""练习 059 · int4 权重的线性层：整行对半打包，按组边解边乘（第 19 章 自定义算子）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch

GROUP = 32  # 一组几个数


def quantize_int4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """w float32 [N, K]（K 是 64 的倍数）→ (packed uint8 [N, K/2], d float32 [N, K/32], m float32 [N, K/32])。
    第 j 个字节的低 4 位是第 j 个数，高 4 位是第 j + K/2 个数。坏参数抛 ValueError。"""
    raise NotImplementedError


def dequantize_int4(packed: torch.Tensor, d: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """解回 float32 [N, K]：w = d·q + m。坏参数抛 ValueError。"""
    raise NotImplementedError


def linear_int4(x: torch.Tensor, packed: torch.Tensor, d: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """y = x @ W.T，W 是 (packed, d, m) 表示的 int4 权重；x float32 [M, K]，M ≥ 1。
    一次只解一组 [N, 32]（或者几行），不造出整块 float32 的 [N, K]。坏参数抛 ValueError。"""
    raise NotImplementedError
