# 作弊：goodput 返回满足的比例
# 为什么必须判错：goodput 是每秒几个满足目标的请求，要除以 makespan；比例不随服务器快慢变，比不出两个配置。
# 判词里要有：makespan
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = goodput


def goodput(traces, makespan, ttft_slo, tpot_slo):
    _checked(traces, makespan, ttft_slo, tpot_slo)
    good = sum(1 for t in traces if t["ttft"] <= ttft_slo and (t["tpot"] is None or t["tpot"] <= tpot_slo))
    return good / len(traces)
