"""练习 008 · 在一个进程里模拟两路张量并行的 MLP（第 2 章 算子层）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch


def column_shard(weight: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    """列并行：weight [out, in] 按第 0 维（输出维）切成 size 段，返回第 rank 段 [out/size, in]。

    weight 不是二维、size 不是正数、rank 越界、out 不能被 size 整除时抛 ValueError。
    """
    raise NotImplementedError


def row_shard(weight: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    """行并行：weight [out, in] 按第 1 维（输入维）切成 size 段，返回第 rank 段 [out, in/size]（连续张量）。

    weight 不是二维、size 不是正数、rank 越界、in 不能被 size 整除时抛 ValueError。
    """
    raise NotImplementedError


def gate_up_shard(gate: torch.Tensor, up: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    """rank 持有的合并权重 [2*inter/size, hidden]：gate 的第 rank 段行在上，up 的第 rank 段行在下。

    gate、up 形状不同时抛 ValueError。
    """
    raise NotImplementedError


def rank_mlp(
    x: torch.Tensor, gate_up_local: torch.Tensor, down_local: torch.Tensor
) -> torch.Tensor:
    """一个 rank 只用自己的权重算出的部分和 [T, hidden]。

    h = x @ gate_up_local.T，前一半过 silu 再乘后一半，最后乘 down_local.T。
    """
    raise NotImplementedError


def tp_mlp(
    x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor, size: int
) -> torch.Tensor:
    """模拟 size 路张量并行的 MLP：每个 rank 切出自己的权重、调用 rank_mlp 算部分和，再全部加起来。

    结果应等于 (silu(x @ gate.T) * (x @ up.T)) @ down.T。
    """
    raise NotImplementedError
