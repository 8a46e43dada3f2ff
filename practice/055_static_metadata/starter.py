"""练习 055 · 走图时的注意力元数据：把这一步的 kv_indices、key_mask 原地拷进固定宽度的缓冲区（第 18 章 图捕获）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch


def fill_static_metadata(kv_indices: torch.Tensor, key_mask: torch.Tensor,
                         static_indices: torch.Tensor, static_mask: torch.Tensor) -> None:
    """kv_indices/key_mask [B, K]，static_indices/static_mask [B, W]（W ≥ K）。原地写 static_*：
    真实的 key 照抄、掩码 True；其余每一列放这一行最后一个真实 key 的槽位、掩码 False。坏参数抛 ValueError。"""
    raise NotImplementedError
