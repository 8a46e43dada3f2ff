# 作弊：交回去的残差是归一化之后的值
# 为什么必须判错：它绕过了这道题的要点（交回去的残差是归一化之后的值），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_add = add_rms_norm
def add_rms_norm(x, residual, weight, eps):
    normed, _ = _orig_add(x, residual, weight, eps)
    return normed, normed
