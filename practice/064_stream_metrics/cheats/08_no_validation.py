# 作弊：算法对，不检查参数：时刻倒着走、output_tokens 比段数少、makespan 是 0 都照算（或者随它抛别的异常）
# 为什么必须判错：题目要求坏参数抛 ValueError；倒着走的时刻会算出负的 ITL，makespan = 0 会除零。
# 判词里要有：应该抛出 ValueError

import math


def percentile(values, q):
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))


def summarize(traces, makespan):
    ttft, tpot, itl = [], [], []
    for t in traces:
        c, n = t["chunks"], t["output_tokens"]
        ttft.append(c[0] - t["sent"])
        if n >= 2:
            tpot.append((c[-1] - c[0]) / (n - 1))
        itl += [b - a for a, b in zip(c, c[1:])]
    total = sum(t["output_tokens"] for t in traces)
    summary = {"requests": len(traces), "output_tokens": total, "throughput": total / makespan}
    for name, values in (("ttft", ttft), ("tpot", tpot), ("itl", itl)):
        for q in (50, 99):
            summary[f"{name}_p{q}_ms"] = percentile(values, q) * 1000 if values else None
    return summary
