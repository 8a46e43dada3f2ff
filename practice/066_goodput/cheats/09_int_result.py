# 作弊：goodput 的值是整数时返回 int
# 为什么必须判错：题目说 goodput 返回 float；调用方拿它去格式化、去比较类型，一会儿 int 一会儿 float 的返回值会出错。
# 判词里要有：float
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = goodput


def goodput(traces, makespan, ttft_slo, tpot_slo):
    r = _checked(traces, makespan, ttft_slo, tpot_slo)
    return int(r) if r == int(r) else r
