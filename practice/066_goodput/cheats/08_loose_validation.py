# 作弊：算得对，参数查得松：ttft 是 nan、tpot 是 True 都照算，rate 是字符串时抛 TypeError
# 为什么必须判错：nan 的 TTFT 和任何目标比都是 False，这个请求悄悄算成不满足；题目要求坏参数一律抛 ValueError。
# 判词里要有：应该抛出 ValueError

import math

def percentile(values, q):
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))

def _pos(name, x):
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not x > 0 or x == math.inf and name != "rate":
        raise ValueError(name)

def _traces(traces):
    if not isinstance(traces, list) or not traces:
        raise ValueError
    for t in traces:
        if not isinstance(t, dict) or "ttft" not in t or "tpot" not in t:
            raise ValueError
        a, b = t["ttft"], t["tpot"]
        if isinstance(a, bool) or not isinstance(a, (int, float)) or a < 0:   # nan ttft accepted
            raise ValueError
        if b is not None and (not isinstance(b, (int, float)) or b < 0):      # tpot True / nan accepted
            raise ValueError

def goodput(traces, makespan, ttft_slo, tpot_slo):
    _traces(traces)
    for n, x in (("m", makespan), ("a", ttft_slo), ("b", tpot_slo)):
        _pos(n, x)
    good = sum(1 for t in traces if t["ttft"] <= ttft_slo and (t["tpot"] is None or t["tpot"] <= tpot_slo))
    r = good / makespan
    return r

def max_rate(runs, ttft_slo, tpot_slo):
    _pos("a", ttft_slo)
    _pos("b", tpot_slo)
    if not isinstance(runs, dict) or not runs:
        raise ValueError
    for rate, traces in runs.items():
        if isinstance(rate, bool) or not rate > 0:    # "2" -> TypeError, not ValueError
            raise ValueError
        _traces(traces)
    best = None
    for rate in sorted(runs):
        tr = runs[rate]
        tp = [t["tpot"] for t in tr if t["tpot"] is not None]
        if percentile([t["ttft"] for t in tr], 99) > ttft_slo or (tp and percentile(tp, 99) > tpot_slo):
            break
        best = rate
    return best
