# 作弊：指标都对，参数只查了一部分：chunks 只查第 1 项的类型、只查最后一对的先后，nan 照算
# 为什么必须判错：倒着走的时刻会算出负的 ITL，nan 会让整张摘要变成 nan；坏的那一段在开头、中间、末尾都要拦住。
# 判词里要有：应该抛出 ValueError

import math

def percentile(values, q):
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))

def num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)

def summarize(traces, makespan):
    if not isinstance(traces, list) or not traces:
        raise ValueError
    if not num(makespan) or makespan <= 0:      # nan / inf makespan accepted
        raise ValueError
    for t in traces:
        if not isinstance(t, dict) or any(k not in t for k in ("sent", "chunks", "output_tokens")):
            raise ValueError
        s, c, n = t["sent"], t["chunks"], t["output_tokens"]
        if not num(s) or not isinstance(c, list) or not c:
            raise ValueError
        if len(c) > 1 and not num(c[1]):        # only looks at chunks[1]
            raise ValueError
        if len(c) > 1 and c[-1] < c[-2]:        # only checks the last pair for order
            raise ValueError
        if c[0] < s:
            raise ValueError
        if not isinstance(n, int) or isinstance(n, bool) or n < len(c):
            raise ValueError
        if c[-1] > makespan:
            raise ValueError
    ttft, tpot, itl = [], [], []
    for t in traces:
        c, n = t["chunks"], t["output_tokens"]
        ttft.append(c[0] - t["sent"])
        if n >= 2:
            tpot.append((c[-1] - c[0]) / (n - 1))
        itl += [b - a for a, b in zip(c, c[1:])]
    total = sum(t["output_tokens"] for t in traces)
    out = {"requests": len(traces), "output_tokens": total, "throughput": total / makespan}
    for name, v in (("ttft", ttft), ("tpot", tpot), ("itl", itl)):
        for q in (50, 99):
            out[f"{name}_p{q}_ms"] = percentile(v, q) * 1000 if v else None
    return out
