# 作弊：吞吐数 SSE 的段数（上游压测数事件的做法）
# 为什么必须判错：吞吐是每秒生成几个 token；段数比 token 数少（或者像上游那样连结束事件一起数就多）。
# 判词里要有：吞吐数的是段数
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
    summary = {"requests": len(traces), "output_tokens": total, "throughput": sum(len(t["chunks"]) for t in traces) / makespan}
    for name, values in (("ttft", ttft), ("tpot", tpot), ("itl", itl)):
        for q in (50, 99):
            summary[f"{name}_p{q}_ms"] = percentile(values, q) * 1000 if values else None
    return summary
