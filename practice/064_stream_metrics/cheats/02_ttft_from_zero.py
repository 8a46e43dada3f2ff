# 作弊：TTFT 取 chunks[0]，从压测开始算
# 为什么必须判错：请求是陆续到达的：从 0 算把它还没发出的时间也算成了等待。
# 判词里要有：sent 算起
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = summarize


def summarize(traces, makespan):
    _checked(traces, makespan)  # 只为了同样地检查参数
    ttft, tpot, itl = [], [], []
    for t in traces:
        c, n = t["chunks"], t["output_tokens"]
        ttft.append(c[0])
        if n >= 2:
            tpot.append((c[-1] - c[0]) / (n - 1))
        itl += [b - a for a, b in zip(c, c[1:])]
    total = sum(t["output_tokens"] for t in traces)
    summary = {"requests": len(traces), "output_tokens": total, "throughput": total / makespan}
    for name, values in (("ttft", ttft), ("tpot", tpot), ("itl", itl)):
        for q in (50, 99):
            summary[f"{name}_p{q}_ms"] = percentile(values, q) * 1000 if values else None
    return summary
