"""练习 063 · 百分位：排好序、按位置线性插值，和 numpy 的默认做法一样（第 21 章 基准测试与消融）

参考答案。
"""

from __future__ import annotations

import math


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and not (isinstance(x, float) and math.isnan(x))


def percentile(values: list[float], q: float) -> float:
    """values 的第 q 百分位（0～100）：排好序，位置 (n − 1)·q/100，落在两个数之间就线性插值。
    不改动 values。坏参数抛 ValueError。"""
    if not isinstance(values, list) or not values:
        raise ValueError(f"values 要是非空的列表，收到 {values!r}")
    if not all(_is_number(v) for v in values):
        raise ValueError("values 的每一项都要是数（int 或 float，不是 bool、不是 nan）")
    if not _is_number(q) or not 0 <= q <= 100:
        raise ValueError(f"q 要是 0～100 之间的数，收到 {q!r}")
    ordered = sorted(values)  # 新列表：不动调用方的
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))
