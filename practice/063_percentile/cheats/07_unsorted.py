# 作弊：忘了排序，按原来的顺序取位置上的数再插值
# 为什么必须判错：百分位是排好序之后的位置；测试里有乱序、倒序的列表。
# 判词里要有：没有先排序
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

import math

_checked = percentile


def percentile(values, q):
    _checked(values, q)
    pos = (len(values) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(values) - 1)
    return float(values[lo] + (values[hi] - values[lo]) * (pos - lo))
