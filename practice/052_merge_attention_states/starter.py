"""练习 052 · split-K 的合并：分块算注意力，用 log-sum-exp 合起来（第 17 章 更快的注意力后端）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch


def attention_state(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """q [T, H, d]，k/v [n, H, d] → (o [T, H, d]（dtype 同 q）, lse [T, H] float32)。n == 0：o 全零、lse 全 -inf。"""
    raise NotImplementedError


def merge_states(outputs: list[torch.Tensor], lses: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """把几块的 (o, lse) 合成一份。列表为空、长度不同、形状对不上时抛 ValueError。"""
    raise NotImplementedError
