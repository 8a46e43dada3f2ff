"""练习 008 · 在一个进程里模拟两路张量并行的 MLP —— 参考答案。"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _check_split(weight: torch.Tensor, dim: int, rank: int, size: int) -> int:
    """检查参数，返回每段的长度。"""
    if weight.dim() != 2:
        raise ValueError(f"weight 应该是二维的 [out, in]，现在的形状是 {tuple(weight.shape)}")
    if size <= 0:
        raise ValueError(f"size 必须是正数，现在是 {size}")
    if not (0 <= rank < size):
        raise ValueError(f"rank 必须在 [0, {size}) 里，现在是 {rank}")
    if weight.shape[dim] % size != 0:
        raise ValueError(f"第 {dim} 维的 {weight.shape[dim]} 不能被 size={size} 整除")
    return weight.shape[dim] // size


def column_shard(weight: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    per = _check_split(weight, 0, rank, size)
    return weight[rank * per : (rank + 1) * per]  # 列并行：切输出维 = weight 的第 0 维


def row_shard(weight: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    per = _check_split(weight, 1, rank, size)
    # 行并行：切输入维 = weight 的第 1 维；按列切出来的视图不连续，拷成独立的一块
    return weight[:, rank * per : (rank + 1) * per].contiguous()


def gate_up_shard(gate: torch.Tensor, up: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    if gate.shape != up.shape:
        raise ValueError(f"gate {tuple(gate.shape)} 和 up {tuple(up.shape)} 的形状应该相同")
    # 先各自切，再拼：rank 拿到的是 gate 的第 rank 段和 up 的第 rank 段
    return torch.cat([column_shard(gate, rank, size), column_shard(up, rank, size)], dim=0)


def rank_mlp(
    x: torch.Tensor, gate_up_local: torch.Tensor, down_local: torch.Tensor
) -> torch.Tensor:
    h = x @ gate_up_local.T  # [T, 2 * inter/size]
    n = h.shape[-1] // 2
    act = F.silu(h[:, :n]) * h[:, n:]  # silu_and_mul：逐元素，只用到本 rank 的那一段
    return act @ down_local.T  # [T, hidden]：完整形状，但只是部分和


def tp_mlp(
    x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor, size: int
) -> torch.Tensor:
    partials = [
        rank_mlp(x, gate_up_shard(gate, up, rank, size), row_shard(down, rank, size))
        for rank in range(size)
    ]
    out = partials[0]
    for p in partials[1:]:  # 模拟 all-reduce：把所有 rank 的部分和加起来
        out = out + p
    return out
