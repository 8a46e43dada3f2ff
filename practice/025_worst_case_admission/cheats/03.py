# 作弊：放不下就跳过，接着试后面的
# 为什么必须判错：题目要求第一个放不下的就停（先到先得，不跳过）；它放不下就跳过、接着试后面的，队列中间卡住时后面能放下的请求也被接纳，返回的个数比参考多。
# 判词里要有：应该接纳
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_admit = admit
def admit(pending, running, **kw):
    taken = []
    for i, req in enumerate(pending):
        if _orig_admit(taken + [req], running, **kw) == len(taken) + 1:
            taken.append(req)
    return len(taken)
