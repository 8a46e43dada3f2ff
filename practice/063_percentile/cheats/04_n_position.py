# 作弊：位置按 n·q/100 算、再插值（越界时取最后一个）
# 为什么必须判错：q = 0 要落在最小值、q = 100 要落在最大值，位置是 (n − 1)·q/100；按 n 算，所有百分位都往大的方向偏。
# 判词里要有：(n − 1)·q/100
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

import math

_checked = percentile


def percentile(values, q):
    _checked(values, q)
    s = sorted(values)
    pos = min(len(s) * q / 100, len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return float(s[lo] + (s[hi] - s[lo]) * (pos - lo))
