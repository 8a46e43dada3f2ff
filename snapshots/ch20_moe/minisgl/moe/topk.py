"""路由：每个 token 选 k 个专家，以及各自的权重。"""

from __future__ import annotations

import torch


def select_experts(router_logits: torch.Tensor, top_k: int, renormalize: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """router_logits [M, E] → (topk_weights [M, k] float32, topk_ids [M, k] int32)。

    先在全部 E 个专家上做 softmax（float32），再取最大的 k 个；renormalize（config 里的 norm_topk_prob）时
    把这 k 个权重再除以它们的和，使之加起来等于 1。顺序和 HF 的 Qwen3-MoE 路由一样，所以权重逐位相同。
    """
    probs = torch.softmax(router_logits, dim=-1, dtype=torch.float32)
    weights, ids = torch.topk(probs, top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids.to(torch.int32)
