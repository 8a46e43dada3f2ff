"""练习 058 · 登记一个算子：schema、CPU 实现和假实现，让 torch.compile 整图编译（第 19 章 自定义算子）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch

GROUP = 32  # 量化分组的大小
SCHEMA = "linear_int8(Tensor x, Tensor q, Tensor d) -> Tensor"


def linear_int8_cpu(x: torch.Tensor, q: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """真正的计算：x float32 [M, K]，q int8 [N, K]，d float32 [N, K/32] → x @ W.T，float32 [M, N]。
    第 n 行第 g 组的 32 个权重是 d[n, g] * q[n, 32g : 32g + 32]。"""
    raise NotImplementedError


def linear_int8_fake(x: torch.Tensor, q: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """假实现：只给出输出的样子（[M, N]，dtype 和 device 随 x），不做任何运算。"""
    raise NotImplementedError


def register_ops() -> None:
    """登记 ex058::linear_int8：schema、CPU 实现、假实现。调用多次时只有第一次登记。"""
    raise NotImplementedError
