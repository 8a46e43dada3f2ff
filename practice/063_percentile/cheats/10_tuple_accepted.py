# 作弊：values 是 tuple 时先转成 list 照算
# 为什么必须判错：题目要求 values 是 list，别的类型抛 ValueError；每种坏参数都要试到，不能靠运气抽到。
# 判词里要有：values 不对
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig = percentile
def percentile(values, q):
    if isinstance(values, tuple):
        values = list(values)   # accepts tuples, statement says ValueError
    return _orig(values, q)
