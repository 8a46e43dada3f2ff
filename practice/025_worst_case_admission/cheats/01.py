# 作弊：忘了在跑的请求将来还要的页
# 为什么必须判错：它绕过了这道题的要点（忘了在跑的请求将来还要的页），只在测试没查到的地方才“对”。
# 判词里要有：忘了在跑的请求
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_admit = admit
def admit(pending, running, **kw):
    return _orig_admit(pending, [], **kw)
