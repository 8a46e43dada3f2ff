"""练习 061 · 路由：softmax、取前 k 个、再归一化，和先取前 k 个再 softmax 差在哪（第 20 章 MoE）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch


def select_experts(router_logits: torch.Tensor, top_k: int, renormalize: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """router_logits [M, E]（浮点）→ (topk_weights float32 [M, k], topk_ids int32 [M, k])。

    在全部 E 个专家上做 softmax（无论输入是什么 dtype，都在 float32 里算），取最大的 k 个，按权重从大到小排；
    renormalize 为真时把这 k 个权重再除以它们的和。坏参数抛 ValueError。"""
    raise NotImplementedError
