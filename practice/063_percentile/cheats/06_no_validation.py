# 作弊：算法对，但不检查参数：q 是 True、120，values 里有字符串都照算
# 为什么必须判错：题目要求坏参数抛 ValueError；q = 120 会悄悄地越界插值，True 被当成 1。
# 判词里要有：应该抛出 ValueError

import math


def percentile(values, q):
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = max(0, min(len(s) - 1, math.floor(pos)))
    hi = min(lo + 1, len(s) - 1)
    return float(s[lo] + (s[hi] - s[lo]) * (pos - lo))
