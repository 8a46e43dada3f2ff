"""练习 066 · goodput：满足延迟目标的请求每秒几个，能承受的最大 rate 是多少（第 21 章 基准测试与消融）

参考答案。
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


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_positive(name: str, x) -> None:
    if not _is_number(x) or x <= 0:
        raise ValueError(f"{name} 要是大于 0 的数，收到 {x!r}")


def _check_traces(traces) -> None:
    if not isinstance(traces, list) or not traces:
        raise ValueError("traces 要是非空的列表")
    for i, t in enumerate(traces):
        if not isinstance(t, dict) or not {"ttft", "tpot"} <= t.keys():
            raise ValueError(f"第 {i} 个请求要是有 ttft、tpot 两个键的字典")
        if not _is_number(t["ttft"]) or t["ttft"] < 0:
            raise ValueError(f"第 {i} 个请求的 ttft 要是 ≥ 0 的数，收到 {t['ttft']!r}")
        if t["tpot"] is not None and (not _is_number(t["tpot"]) or t["tpot"] < 0):
            raise ValueError(f"第 {i} 个请求的 tpot 要是 None 或 ≥ 0 的数，收到 {t['tpot']!r}")


def goodput(traces: list[dict], makespan: float, ttft_slo: float, tpot_slo: float) -> float:
    """每秒几个请求同时满足 ttft ≤ ttft_slo 和 tpot ≤ tpot_slo（tpot 是 None 时只看 TTFT）。坏参数抛 ValueError。"""
    _check_traces(traces)
    for name, x in (("makespan", makespan), ("ttft_slo", ttft_slo), ("tpot_slo", tpot_slo)):
        _check_positive(name, x)
    good = sum(1 for t in traces if t["ttft"] <= ttft_slo and (t["tpot"] is None or t["tpot"] <= tpot_slo))
    return good / makespan


def _meets(traces: list[dict], ttft_slo: float, tpot_slo: float) -> bool:
    tpots = [t["tpot"] for t in traces if t["tpot"] is not None]
    if percentile([t["ttft"] for t in traces], 99) > ttft_slo:
        return False
    return not tpots or percentile(tpots, 99) <= tpot_slo


def max_rate(runs: dict[float, list[dict]], ttft_slo: float, tpot_slo: float) -> float | None:
    """rate 从小到大，P99 TTFT、P99 TPOT 都不超过目标的，连续达标的最后一个；最小的就不达标时返回 None。
    坏参数抛 ValueError。"""
    _check_positive("ttft_slo", ttft_slo)
    _check_positive("tpot_slo", tpot_slo)
    if not isinstance(runs, dict) or not runs:
        raise ValueError("runs 要是非空的字典 {rate: traces}")
    for rate, traces in runs.items():
        _check_positive("rate", rate)
        _check_traces(traces)
    best = None
    for rate in sorted(runs):
        if not _meets(runs[rate], ttft_slo, tpot_slo):
            break  # 后面的 rate 即使碰巧达标也不算：容量是从小到大连续达标的那一段
        best = rate
    return best
