"""练习 062 · 专家并行的一个 rank：只有本地专家的权重，算出自己那一份（第 20 章 MoE）

参考答案。
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def local_ids(topk_ids: torch.Tensor, rank: int, ep_size: int, num_experts: int) -> torch.Tensor:
    """全局专家编号 topk_ids（int32 [M, k]）→ 本 rank 上的编号（int32 [M, k]）：本 rank 放专家
    [rank·E/ep_size, (rank+1)·E/ep_size)，在这里面的减去第一个的编号，不在的标 -1。坏参数抛 ValueError。"""
    if ep_size < 1:
        raise ValueError(f"ep_size 至少是 1，收到 {ep_size}")
    if num_experts % ep_size != 0:
        raise ValueError(f"专家数 {num_experts} 分不匀给 {ep_size} 个 rank：专家并行要求 E 是 ep_size 的倍数")
    if not 0 <= rank < ep_size:
        raise ValueError(f"rank 要在 [0, {ep_size}) 里，收到 {rank}")
    per = num_experts // ep_size
    local = topk_ids - rank * per
    return torch.where((local >= 0) & (local < per), local, -1)


def rank_output(x: torch.Tensor, w1_local: torch.Tensor, w2_local: torch.Tensor,
                topk_weights: torch.Tensor, local_topk_ids: torch.Tensor) -> torch.Tensor:
    """本 rank 对 MoE 输出的贡献（float32 [M, H]）：第 m 行 = Σ topk_weights[m, j] · 专家(x_m)，
    j 只取 local_topk_ids[m, j] ≥ 0 的格子，专家用 w1_local / w2_local 里的第 local_topk_ids[m, j] 个。
    一个本地专家都没选的行是 0。各 rank 的结果加起来（all_reduce）就是完整的 MoE 输出。"""
    out = torch.zeros_like(x)
    inter = w2_local.shape[2]
    for e in range(w1_local.shape[0]):  # 只走本地专家：-1 永远不会被当成下标
        token, slot = torch.where(local_topk_ids == e)
        if token.numel() == 0:
            continue
        h = x[token] @ w1_local[e].T  # [n, 2I]：前 I 列是 gate，后 I 列是 up
        y = (F.silu(h[:, :inter]) * h[:, inter:]) @ w2_local[e].T  # [n, H]
        out.index_add_(0, token, y * topk_weights[token, slot, None])  # 乘的是这一格的权重
    return out
