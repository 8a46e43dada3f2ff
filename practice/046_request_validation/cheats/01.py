# 作弊：true 当成整数 1（isinstance(True, int)）
# 为什么必须判错：它绕过了这道题的要点（true 当成整数 1（isinstance(True, int)）），只在测试没查到的地方才“对”。
# 判词里要有：坏请求没有被拦住｜报错的 param
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _is_int(x):
    return isinstance(x, int)  # True 也是 int
