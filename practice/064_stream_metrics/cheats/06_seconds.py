# 作弊：延迟没有换成毫秒
# 为什么必须判错：键名是 *_ms：差 1000 倍的数会让报告里的 TTFT 看起来是 0.5 毫秒。
# 判词里要有：毫秒
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
            summary[f"{name}_p{q}_ms"] = percentile(values, q) if values else None
    return summary
