# 作弊：用 values.sort() 就地排序，算得对，但把调用方的列表改了
# 为什么必须判错：题目要求不改动参数：调用方（比如 summarize）接着还要按原来的顺序用这些数。
# 判词里要有：不该改动参数
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

import math

_checked = percentile


def percentile(values, q):
    _checked(values, q)
    values.sort()
    pos = (len(values) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(values) - 1)
    return float(values[lo] + (values[hi] - values[lo]) * (pos - lo))
