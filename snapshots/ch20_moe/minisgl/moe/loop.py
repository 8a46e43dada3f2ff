"""参考实现：挨个专家算。谁选了专家 e 就把谁挑出来，过一遍 e 的 MLP，乘上权重加回各自的行。"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from minisgl.layers import silu_and_mul

from .base import BaseMoeBackend


class LoopMoe(BaseMoeBackend):
    def forward(self, x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor,
                topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        # 被选中的专家有哪些、各有几行，取决于数据：.tolist() 要把它读回主机（GPU 上是一次同步），
        # 每个专家的行数也各不相同——这一步录不进 CUDA 图，也编不成一张固定形状的图
        for e in torch.unique(topk_ids).tolist():
            if e < 0:  # 不在本 rank 上的专家
                continue
            token, slot = torch.where(topk_ids == e)
            y = F.linear(silu_and_mul(F.linear(x[token], w1[e])), w2[e])
            out.index_add_(0, token, y * topk_weights[token, slot, None])
        return out
