"""练习 058 · 登记一个算子：schema、CPU 实现和假实现，让 torch.compile 整图编译（第 19 章 自定义算子）

参考答案。
"""

from __future__ import annotations

import torch

GROUP = 32  # 量化分组的大小
SCHEMA = "linear_int8(Tensor x, Tensor q, Tensor d) -> Tensor"

_LIB = None  # 登记用的 Library：要一直留着，它被回收时，它登记的东西也跟着撤销。它也是“登记过了”的标记


def linear_int8_cpu(x: torch.Tensor, q: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """真正的计算：x float32 [M, K]，q int8 [N, K]，d float32 [N, K/32] → x @ W.T，float32 [M, N]。
    第 n 行第 g 组的 32 个权重是 d[n, g] * q[n, 32g : 32g + 32]。"""
    n, k = q.shape
    w = (q.view(n, k // GROUP, GROUP).float() * d.view(n, k // GROUP, 1)).view(n, k)
    return x @ w.T


def linear_int8_fake(x: torch.Tensor, q: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """假实现：只给出输出的样子（[M, N]，dtype 和 device 随 x），不做任何运算。"""
    return x.new_empty(x.shape[0], q.shape[0])


def register_ops() -> None:
    """登记 ex058::linear_int8：schema、CPU 实现、假实现。调用多次时只有第一次登记。"""
    global _LIB
    if _LIB is not None:
        return
    lib = torch.library.Library("ex058", "DEF")
    lib.define(SCHEMA)
    lib.impl("linear_int8", linear_int8_cpu, "CPU")
    torch.library.register_fake("ex058::linear_int8", linear_int8_fake, lib=lib)
    _LIB = lib
