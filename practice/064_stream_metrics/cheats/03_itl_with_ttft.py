# 作弊：ITL 里把“发出 → 第一段”也算进去
# 为什么必须判错：ITL 是相邻两段文字之间的间隔；混进 TTFT 会把 P99 的 ITL 拉成 prefill 的时间。
# 判词里要有：ITL 只算相邻两段
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
        itl += [c[0] - t["sent"]] + [b - a for a, b in zip(c, c[1:])]
    total = sum(t["output_tokens"] for t in traces)
    summary = {"requests": len(traces), "output_tokens": total, "throughput": total / makespan}
    for name, values in (("ttft", ttft), ("tpot", tpot), ("itl", itl)):
        for q in (50, 99):
            summary[f"{name}_p{q}_ms"] = percentile(values, q) * 1000 if values else None
    return summary
