# 作弊：放不下就跳过，接着试后面的
# 为什么必须判错：它绕过了这道题的要点（放不下就跳过，接着试后面的），只在测试没查到的地方才“对”。
# 判词里要有：应该接纳
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_admit = admit
def admit(pending, running, **kw):
    taken = []
    for i, req in enumerate(pending):
        if _orig_admit(taken + [req], running, **kw) == len(taken) + 1:
            taken.append(req)
    return len(taken)
