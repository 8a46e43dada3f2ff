"""MoE 层：每个专家的 gate_up、down 叠成两个三维张量，前向时交给上下文里的 MoE 后端。

两种分法，都用 TP 的那组 rank，最后都是一次 all_reduce：
- 专家 TP（默认）：每个 rank 有全部 E 个专家，每个专家的中间维切成 tp_size 份（gate/up 按行、down 按列，
  和稠密 MLP 一样）。每个 rank 算出的是部分和。
- 专家并行（EP）：每个 rank 放 E / tp_size 个完整的专家。路由在每个 rank 上算出同样的结果，
  选中别的 rank 上专家的格子在本 rank 标成 -1 跳过；每个 rank 只算自己专家的那一份。
"""

from __future__ import annotations

import torch

from minisgl.core import get_global_ctx
from minisgl.distributed import DistributedCommunicator, get_ep_info, get_tp_info
from minisgl.moe.topk import select_experts
from minisgl.utils import div_even

from .base import BaseOP


class MoELayer(BaseOP):
    def __init__(self, num_experts: int, top_k: int, hidden_size: int, intermediate_size: int,
                 renormalize: bool) -> None:
        self.num_experts, self.top_k, self.renormalize = num_experts, top_k, renormalize
        tp, ep = get_tp_info(), get_ep_info()
        self.tp_size = tp.size
        self.num_local_experts = div_even(num_experts, ep.size)
        self.first_expert = ep.rank * self.num_local_experts  # 本 rank 的专家是 [first, first + 本地个数)
        local_inter = div_even(intermediate_size, tp.size // ep.size)  # EP 时专家不切
        self.gate_up_proj = torch.empty(self.num_local_experts, 2 * local_inter, hidden_size)
        self.down_proj = torch.empty(self.num_local_experts, hidden_size, local_inter)
        self._comm = DistributedCommunicator()

    def local_ids(self, topk_ids: torch.Tensor) -> torch.Tensor:
        """全局专家编号 → 本 rank 上的编号；不在本 rank 上的是 -1。不分专家时原样返回。"""
        if self.num_local_experts == self.num_experts:
            return topk_ids
        local = topk_ids - self.first_expert
        return torch.where((local >= 0) & (local < self.num_local_experts), local, -1)

    def forward(self, x: torch.Tensor, router_logits: torch.Tensor) -> torch.Tensor:
        weights, ids = select_experts(router_logits, self.top_k, self.renormalize)
        out = get_global_ctx().moe_backend.forward(x, self.gate_up_proj, self.down_proj, weights,
                                                   self.local_ids(ids))
        if self.tp_size > 1:  # 部分和（专家 TP）或一部分专家的贡献（EP）：加起来才是完整的输出
            out = self._comm.all_reduce(out)
        return out
