# 作弊：goodput 里 tpot 是 None 的请求算不满足
# 为什么必须判错：只生成 1 个 token 的请求没有 TPOT，它只受 TTFT 的约束；算它不满足会低估 goodput。
# 判词里要有：None
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = goodput


def goodput(traces, makespan, ttft_slo, tpot_slo):
    _checked(traces, makespan, ttft_slo, tpot_slo)
    good = sum(1 for t in traces if t["ttft"] <= ttft_slo and t["tpot"] is not None and t["tpot"] <= tpot_slo)
    return good / makespan
