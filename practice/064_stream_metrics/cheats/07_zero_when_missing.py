# 作弊：没有 TPOT、ITL 时报 0.0，不报 None
# 为什么必须判错：0 毫秒是一个（极好的）延迟，不是“没有”；全是 1 个 token 的请求时 TPOT 不存在。
# 判词里要有：None
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = summarize


def summarize(traces, makespan):
    _checked(traces, makespan)  # 只为了同样地检查参数
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
            summary[f"{name}_p{q}_ms"] = percentile(values, q) * 1000 if values else 0.0
    return summary
