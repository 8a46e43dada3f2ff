"""练习 064 · 从流式的到达时刻算 TTFT、TPOT、ITL 和吞吐（第 21 章 基准测试与消融）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import math


def percentile(values: list[float], q: float) -> float:
    """（已经写好）第 q 百分位：排好序，位置 (n − 1)·q/100，线性插值。"""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))


def summarize(traces: list[dict], makespan: float) -> dict:
    """每个请求 {"sent", "chunks", "output_tokens"} → 摘要：requests、output_tokens、throughput，
    以及 TTFT、TPOT、ITL 的 P50 / P99（毫秒，没有值时是 None）。坏参数抛 ValueError。"""
    raise NotImplementedError
