# 作弊：负的 lock_pages 当成 0
# 为什么必须判错：题目要求排队请求里任何一个数是负的都抛 ValueError；它把负的 lock_pages 悄悄当成 0 接着算，本该报错的参数被接受了。
# 判词里要有：lock_pages 是负数
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_admit = admit
def admit(pending, running, **kw):
    pending = [(i, m, c, max(lock, 0)) for i, m, c, lock in pending]
    return _admit(pending, running, **kw)
