# 作弊：TPOT 取这个请求 ITL 的平均数：(最后一段 − 第一段) / (段数 − 1)
# 为什么必须判错：一段里可能有两三个 token（半个字被扣住），段数比 token 数少时这个数偏大；TPOT 是每个输出 token 的时间。
# 判词里要有：output_tokens − 1
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = summarize


def summarize(traces, makespan):
    _checked(traces, makespan)  # 只为了同样地检查参数
    ttft, tpot, itl = [], [], []
    for t in traces:
        c, n = t["chunks"], t["output_tokens"]
        ttft.append(c[0] - t["sent"])
        if len(c) >= 2:
            tpot.append((c[-1] - c[0]) / (len(c) - 1))
        itl += [b - a for a, b in zip(c, c[1:])]
    total = sum(t["output_tokens"] for t in traces)
    summary = {"requests": len(traces), "output_tokens": total, "throughput": total / makespan}
    for name, values in (("ttft", ttft), ("tpot", tpot), ("itl", itl)):
        for q in (50, 99):
            summary[f"{name}_p{q}_ms"] = percentile(values, q) * 1000 if values else None
    return summary
