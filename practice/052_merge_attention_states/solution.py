"""练习 052 · split-K 的合并：分块算注意力，用 log-sum-exp 合起来（第 17 章 更快的注意力后端）

参考答案。
"""

from __future__ import annotations

import torch


def attention_state(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """q [T, H, d]，k/v [n, H, d] → (o [T, H, d]（dtype 同 q）, lse [T, H] float32)。n == 0：o 全零、lse 全 -inf。"""
    if q.dim() != 3 or k.dim() != 3 or k.shape != v.shape or k.shape[1:] != q.shape[1:]:
        raise ValueError(f"形状对不上：q {tuple(q.shape)}，k {tuple(k.shape)}，v {tuple(v.shape)}")
    T, H, _ = q.shape
    if k.shape[0] == 0:
        return torch.zeros_like(q), torch.full((T, H), float("-inf"))
    s = torch.einsum("thd,nhd->thn", q.float(), k.float()) * scale
    lse = torch.logsumexp(s, dim=-1)
    o = torch.einsum("thn,nhd->thd", torch.softmax(s, dim=-1), v.float())
    return o.to(q.dtype), lse


def merge_states(outputs: list[torch.Tensor], lses: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """把几块的 (o, lse) 合成一份。列表为空、长度不同、形状对不上时抛 ValueError。"""
    if not outputs or len(outputs) != len(lses):
        raise ValueError("outputs 和 lses 要一样长，而且至少一个")
    shape = outputs[0].shape
    if len(shape) != 3 or any(o.shape != shape for o in outputs) or any(l.shape != shape[:2] for l in lses):
        raise ValueError("各块的形状对不上")
    lse = torch.stack([l.float() for l in lses])  # [K, T, H]
    m = lse.max(dim=0).values
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)  # 全是 -inf 的位置：权重都会是 0
    w = torch.exp(lse - m)  # 每块的权重，最大的一块是 1
    total = w.sum(dim=0)
    o = (w[..., None] * torch.stack([o.float() for o in outputs])).sum(dim=0)
    empty = total == 0
    o = torch.where(empty[..., None], torch.zeros_like(o), o / torch.where(empty, 1.0, total)[..., None])
    merged_lse = torch.where(empty, float("-inf"), m + torch.log(total))
    return o.to(outputs[0].dtype), merged_lse
