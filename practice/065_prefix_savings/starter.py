"""练习 065 · 共享前缀省下多少 prefill：按到达顺序数出每个请求要算几个 token（第 21 章 基准测试与消融）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def prefill_costs(batches: list[list[list[int]]], page_size: int) -> list[list[int]]:
    """按顺序的几批 prefill → 每个请求要算几个提示 token（形状和 batches 一样）。

    提示去掉最后一个 token 去匹配此前各批插进树的序列，匹配长度向下取整到整页；一批算完才插进树
    （也只留整页）。坏参数抛 ValueError。"""
    raise NotImplementedError
