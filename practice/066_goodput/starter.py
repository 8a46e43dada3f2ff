"""练习 066 · goodput：满足延迟目标的请求每秒几个，能承受的最大 rate 是多少（第 21 章 基准测试与消融）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
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


def goodput(traces: list[dict], makespan: float, ttft_slo: float, tpot_slo: float) -> float:
    """每秒几个请求同时满足 ttft ≤ ttft_slo 和 tpot ≤ tpot_slo（tpot 是 None 时只看 TTFT）。坏参数抛 ValueError。"""
    raise NotImplementedError


def max_rate(runs: dict[float, list[dict]], ttft_slo: float, tpot_slo: float) -> float | None:
    """rate 从小到大，P99 TTFT、P99 TPOT 都不超过目标的，连续达标的最后一个；最小的就不达标时返回 None。
    坏参数抛 ValueError。"""
    raise NotImplementedError
