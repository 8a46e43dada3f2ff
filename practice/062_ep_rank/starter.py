"""练习 062 · 专家并行的一个 rank：只有本地专家的权重，算出自己那一份（第 20 章 MoE）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def local_ids(topk_ids: torch.Tensor, rank: int, ep_size: int, num_experts: int) -> torch.Tensor:
    """全局专家编号 topk_ids（int32 [M, k]）→ 本 rank 上的编号（int32 [M, k]）：本 rank 放专家
    [rank·E/ep_size, (rank+1)·E/ep_size)，在这里面的减去第一个的编号，不在的标 -1。坏参数抛 ValueError。"""
    raise NotImplementedError


def rank_output(x: torch.Tensor, w1_local: torch.Tensor, w2_local: torch.Tensor,
                topk_weights: torch.Tensor, local_topk_ids: torch.Tensor) -> torch.Tensor:
    """本 rank 对 MoE 输出的贡献（float32 [M, H]）：第 m 行 = Σ topk_weights[m, j] · 专家(x_m)，
    j 只取 local_topk_ids[m, j] ≥ 0 的格子，专家用 w1_local / w2_local 里的第 local_topk_ids[m, j] 个。
    一个本地专家都没选的行是 0。各 rank 的结果加起来（all_reduce）就是完整的 MoE 输出。"""
    raise NotImplementedError
