# 作弊：用标准库的 statistics.quantiles(method="inclusive") 算出 1～99 的整数百分位，q 取整后查表
# 为什么必须判错：它只在整数 q 上和插值的定义相同；q 是任意小数（比如 37.4）时，查表取整的结果不对，测试随机抽小数的 q。
# 判词里要有：不对
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

import statistics

_checked = percentile


def percentile(values, q):
    _checked(values, q)
    if len(values) == 1:
        return float(values[0])
    table = [min(values)] + statistics.quantiles(values, n=100, method="inclusive") + [max(values)]
    return float(table[round(q)])
