# 作弊：按请求、按头循环，用掩码而不取数
# 为什么必须判错：它绕过了这道题的要点（按请求、按头循环，用掩码而不取数），只在测试没查到的地方才“对”。
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
