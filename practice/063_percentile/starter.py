"""练习 063 · 百分位：排好序、按位置线性插值，和 numpy 的默认做法一样（第 21 章 基准测试与消融）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def percentile(values: list[float], q: float) -> float:
    """values 的第 q 百分位（0～100）：排好序，位置 (n − 1)·q/100，落在两个数之间就线性插值。
    不改动 values。坏参数抛 ValueError。"""
    raise NotImplementedError
