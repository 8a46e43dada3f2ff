# 作弊：负的 lock_pages 当成 0
# 为什么必须判错：它绕过了这道题的要点（负的 lock_pages 当成 0），只在测试没查到的地方才“对”。
# 判词里要有：lock_pages 是负数
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_admit = admit
def admit(pending, running, **kw):
    pending = [(i, m, c, max(lock, 0)) for i, m, c, lock in pending]
    return _admit(pending, running, **kw)
