# 作弊：位置对了，但只取 s[⌊pos⌋]，不插值
# 为什么必须判错：pos 落在两个下标之间时结果要按距离插值；只取下面那个数，P99 会系统地偏小。
# 判词里要有：没有插值
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

import math

_checked = percentile


def percentile(values, q):
    _checked(values, q)
    s = sorted(values)
    return float(s[math.floor((len(s) - 1) * q / 100)])
