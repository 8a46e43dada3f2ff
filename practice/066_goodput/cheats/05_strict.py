# 作弊：用 < 判断满足，正好等于目标的算不满足
# 为什么必须判错：目标写的是“不超过”：等于目标也满足。测试里有正好等于目标的请求。
# 判词里要有：≤
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = goodput


def goodput(traces, makespan, ttft_slo, tpot_slo):
    _checked(traces, makespan, ttft_slo, tpot_slo)
    good = sum(1 for t in traces if t["ttft"] < ttft_slo and (t["tpot"] is None or t["tpot"] < tpot_slo))
    return good / makespan
