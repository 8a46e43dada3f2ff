# 作弊：goodput 只看 TTFT
# 为什么必须判错：两个目标要同时满足：首字很快、之后一个字一个字地挤出来的请求，用户一样不满意。
# 判词里要有：只看了 TTFT
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = goodput


def goodput(traces, makespan, ttft_slo, tpot_slo):
    _checked(traces, makespan, ttft_slo, tpot_slo)
    return sum(1 for t in traces if t["ttft"] <= ttft_slo) / makespan
