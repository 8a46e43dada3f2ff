# 作弊：按请求、按头循环，用掩码而不取数
# 为什么必须判错：题目要求 padded_attention 一次批量算完、不按请求按头循环；它虽然用掩码不取数，但对每个请求、每个头各算一次，换成更多请求、更多头时 torch 运算次数跟着变多。
# 判词里要有：运算次数
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

import math
def padded_attention(q, k, v, valid):
    B, Hq, D = q.shape
    group = Hq // k.shape[2]
    out = torch.empty_like(q)
    for b in range(B):
        for h in range(Hq):
            s = (k[b, :, h // group] @ q[b, h]) / math.sqrt(D)
            s = s.masked_fill(~valid[b], float("-inf"))
            out[b, h] = torch.softmax(s, -1) @ v[b, :, h // group]
    return out
