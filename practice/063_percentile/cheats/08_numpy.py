# 作弊：直接调用 numpy.percentile（参数检查照题目写）
# 为什么必须判错：这道题要写的正是插值的百分位，而且只用标准库（网页上的评测没有 numpy）；学习者的进程里导入 numpy 就判错。
# 判词里要有：只用 Python 标准库

import math
import numpy as np

def percentile(values, q):
    if not isinstance(values, list) or not values:
        raise ValueError("bad")
    for v in values:
        if not isinstance(v, (int, float)) or isinstance(v, bool) or (isinstance(v, float) and math.isnan(v)):
            raise ValueError("bad")
    if not isinstance(q, (int, float)) or isinstance(q, bool) or not 0 <= q <= 100:
        raise ValueError("bad")
    return float(np.percentile(values, q))
