"""MoE 后端的接口：给定每个 token 选中的专家和权重，算出 Σ 权重 × 专家(x)。"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch


class BaseMoeBackend(ABC):
    @abstractmethod
    def forward(self, x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor,
                topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
        """x [M, hidden]；w1 [E, 2·inter, hidden]（每个专家的 gate 在上、up 在下）；w2 [E, hidden, inter]；
        topk_weights [M, k] float32，topk_ids [M, k] int32。topk_ids 是本 rank 上的专家编号 0..E-1，
        -1 表示这一格的专家不在本 rank 上（专家并行时），跳过。

        返回 [M, hidden]：第 m 行 = Σ_j topk_weights[m, j] · down(silu(gate(x_m)) · up(x_m))，
        j 取遍 topk_ids[m, j] ≥ 0 的格子，用的是专家 topk_ids[m, j] 的权重。
        """
