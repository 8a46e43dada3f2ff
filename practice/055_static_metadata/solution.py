"""练习 055 · 走图时的注意力元数据：把这一步的 kv_indices、key_mask 原地拷进固定宽度的缓冲区（第 18 章 图捕获）

参考答案。
"""

from __future__ import annotations

import torch


def fill_static_metadata(kv_indices: torch.Tensor, key_mask: torch.Tensor,
                         static_indices: torch.Tensor, static_mask: torch.Tensor) -> None:
    """kv_indices/key_mask [B, K]，static_indices/static_mask [B, W]（W ≥ K）。原地写 static_*：
    真实的 key 照抄、掩码 True；其余每一列放这一行最后一个真实 key 的槽位、掩码 False。坏参数抛 ValueError。"""
    tensors = (kv_indices, key_mask, static_indices, static_mask)
    if any(t.dim() != 2 for t in tensors):
        raise ValueError(f"四个张量都要是二维的，收到 {[tuple(t.shape) for t in tensors]}")
    if kv_indices.shape != key_mask.shape or static_indices.shape != static_mask.shape:
        raise ValueError("kv_indices 和 key_mask、static_indices 和 static_mask 的形状要一样")
    (B, K), (B2, W) = kv_indices.shape, static_indices.shape
    if B != B2 or W < K:
        raise ValueError(f"缓冲区 [{B2}, {W}] 装不下这一步的 [{B}, {K}]")
    if key_mask.dtype != torch.bool or static_mask.dtype != torch.bool:
        raise ValueError("掩码要是 torch.bool")
    if kv_indices.dtype != static_indices.dtype:
        raise ValueError(f"槽位的 dtype 不同：{kv_indices.dtype} 和 {static_indices.dtype}")
    n = key_mask.sum(dim=1)
    if bool((n == 0).any()):
        raise ValueError("有一行一个 key 都没有")
    if not torch.equal(key_mask, torch.arange(K) < n[:, None]):
        raise ValueError("key_mask 的每一行要是前 n 个 True、其余 False")
    mask = torch.arange(W) < n[:, None]
    last = kv_indices.gather(1, (n - 1)[:, None])  # [B, 1] 每行最后一个真实 key 的槽位
    wide = torch.cat([kv_indices, last.expand(B, W - K)], dim=1)
    static_indices.copy_(torch.where(mask, wide, last))
    static_mask.copy_(mask)
