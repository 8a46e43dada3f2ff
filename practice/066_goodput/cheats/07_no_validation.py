# 作弊：算法对，不检查参数
# 为什么必须判错：题目要求坏参数抛 ValueError：makespan = 0 会除零，rate 是负数、tpot 是字符串都照算或抛别的异常。
# 判词里要有：应该抛出 ValueError

import math


def percentile(values, q):
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))


def goodput(traces, makespan, ttft_slo, tpot_slo):
    good = sum(1 for t in traces if t["ttft"] <= ttft_slo and (t["tpot"] is None or t["tpot"] <= tpot_slo))
    return good / makespan


def max_rate(runs, ttft_slo, tpot_slo):
    best = None
    for rate in sorted(runs):
        tpots = [t["tpot"] for t in runs[rate] if t["tpot"] is not None]
        if percentile([t["ttft"] for t in runs[rate]], 99) > ttft_slo or (tpots and percentile(tpots, 99) > tpot_slo):
            break
        best = rate
    return best
