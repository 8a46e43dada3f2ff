"""练习 064 · 从流式的到达时刻算 TTFT、TPOT、ITL 和吞吐（第 21 章 基准测试与消融）

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


def _check_trace(i: int, t) -> None:
    if not isinstance(t, dict) or not {"sent", "chunks", "output_tokens"} <= t.keys():
        raise ValueError(f"第 {i} 个请求要是有 sent、chunks、output_tokens 三个键的字典")
    sent, chunks, tokens = t["sent"], t["chunks"], t["output_tokens"]
    if not _is_number(sent):
        raise ValueError(f"第 {i} 个请求的 sent 不是数：{sent!r}")
    if not isinstance(chunks, list) or not chunks or not all(_is_number(c) for c in chunks):
        raise ValueError(f"第 {i} 个请求的 chunks 要是非空的、由数组成的列表")
    if any(b < a for a, b in zip(chunks, chunks[1:])) or chunks[0] < sent:
        raise ValueError(f"第 {i} 个请求的时刻不对：chunks 要从小到大，且不早于 sent")
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < len(chunks):
        raise ValueError(f"第 {i} 个请求的 output_tokens 要是不少于段数 {len(chunks)} 的整数，收到 {tokens!r}")


def summarize(traces: list[dict], makespan: float) -> dict:
    """每个请求 {"sent", "chunks", "output_tokens"} → 摘要：requests、output_tokens、throughput，
    以及 TTFT、TPOT、ITL 的 P50 / P99（毫秒，没有值时是 None）。坏参数抛 ValueError。"""
    if not isinstance(traces, list) or not traces:
        raise ValueError("traces 要是非空的列表")
    if not _is_number(makespan) or makespan <= 0:
        raise ValueError(f"makespan 要是大于 0 的数，收到 {makespan!r}")
    for i, t in enumerate(traces):
        _check_trace(i, t)
        if t["chunks"][-1] > makespan:
            raise ValueError(f"第 {i} 个请求在 makespan {makespan} 之后才结束")
    ttft, tpot, itl = [], [], []
    for t in traces:
        chunks, tokens = t["chunks"], t["output_tokens"]
        ttft.append(chunks[0] - t["sent"])
        if tokens >= 2:
            tpot.append((chunks[-1] - chunks[0]) / (tokens - 1))  # 除以 token 数减一：一段里可能有几个 token
        itl += [b - a for a, b in zip(chunks, chunks[1:])]
    total = sum(t["output_tokens"] for t in traces)
    summary = {"requests": len(traces), "output_tokens": total, "throughput": total / makespan}
    for name, values in (("ttft", ttft), ("tpot", tpot), ("itl", itl)):
        for q in (50, 99):
            summary[f"{name}_p{q}_ms"] = percentile(values, q) * 1000 if values else None
    return summary
