"""练习 018 · top-k 与 top-p 过滤（第 6 章 Engine 与采样器）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch


def top_k_top_p_filter(
    logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor
) -> torch.Tensor:
    """每一行先 top-k、再 top-p（在 top-k 剩下的 token 上重新 softmax），留下的位置保持原 logit，其余为 -inf。

    logits: [B, V]；top_k: [B] 整数，-1 或 >= V 表示不限制；top_p: [B]，在 (0, 1] 里，1 表示不限制。
    排序时 logit 并列的 token，id 小的排在前面。top-p 留下“排在前面的概率之和 < p”的 token。
    返回同形状、同 dtype 的新张量。参数不对时抛 ValueError（见题目）。
    """
    raise NotImplementedError
