"""练习 061 · 路由：softmax、取前 k 个、再归一化，和先取前 k 个再 softmax 差在哪（第 20 章 MoE）

参考答案。
"""

from __future__ import annotations

import torch


def select_experts(router_logits: torch.Tensor, top_k: int, renormalize: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """router_logits [M, E]（浮点）→ (topk_weights float32 [M, k], topk_ids int32 [M, k])。

    在全部 E 个专家上做 softmax（无论输入是什么 dtype，都在 float32 里算），取最大的 k 个，按权重从大到小排；
    renormalize 为真时把这 k 个权重再除以它们的和。坏参数抛 ValueError。"""
    if not isinstance(router_logits, torch.Tensor) or router_logits.dim() != 2:
        raise ValueError(f"router_logits 要是二维的 [M, E] 张量，收到 {getattr(router_logits, 'shape', router_logits)!r}")
    if not router_logits.is_floating_point():
        raise ValueError(f"router_logits 要是浮点张量，收到 {router_logits.dtype}")
    m, e = router_logits.shape
    if m == 0 or e == 0:
        raise ValueError(f"router_logits 不能是空的，收到形状 {(m, e)}")
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= e:
        raise ValueError(f"top_k 要是 1 到 {e}（专家数）之间的 int，收到 {top_k!r}")
    probs = torch.softmax(router_logits, dim=-1, dtype=torch.float32)  # 先转 float32 再 softmax（会减去每行最大值）
    weights, ids = torch.topk(probs, top_k, dim=-1)  # 按权重从大到小
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids.to(torch.int32)
