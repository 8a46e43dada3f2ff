# 作弊：忘了在跑的请求将来还要的页
# 为什么必须判错：题目要求 reserved 一开始就是每个在跑请求将来还要的页之和；它把 running 当空列表，有请求在跑、页数恰好不够时还接纳新请求，在跑的请求之后会分不到页。
# 判词里要有：忘了在跑的请求
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_admit = admit
def admit(pending, running, **kw):
    return _orig_admit(pending, [], **kw)
