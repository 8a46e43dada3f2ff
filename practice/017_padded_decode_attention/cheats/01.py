# 作弊：按请求、按头循环，手写 softmax
# 为什么必须判错：题目要求 padded_attention 一次批量算完、不按请求按头循环、不把张量转成 Python 的数；它按请求、按头循环，还用 int(valid[b].sum()) 取数，测试发现它把张量转成了 Python 的数。
# 判词里要有：Python
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

import math
def padded_attention(q, k, v, valid):
    B, Hq, D = q.shape
    group = Hq // k.shape[2]
    out = torch.empty_like(q)
    for b in range(B):
        n = int(valid[b].sum())
        for h in range(Hq):
            kk = k[b, :n, h // group].double()
            s = (kk @ q[b, h].double()) / math.sqrt(D)
            w = torch.exp(s - s.max())
            out[b, h] = ((w / w.sum()) @ v[b, :n, h // group].double()).to(q.dtype)
    return out
