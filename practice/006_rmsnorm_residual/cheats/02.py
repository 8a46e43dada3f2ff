# 作弊：交回去的残差是归一化之后的值
# 为什么必须判错：题目要求交回去的残差是累加和 x + residual（残差流），normed 只给下一个子层；它把归一化后的值当残差交回，单层 normed 还对，串起三层残差流后就面目全非。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_add = add_rms_norm
def add_rms_norm(x, residual, weight, eps):
    normed, _ = _orig_add(x, residual, weight, eps)
    return normed, normed
