# 作弊：把张量全转成 Python 的数自己算
# 为什么必须判错：题目要求在张量上批量计算，不要把张量转成 Python 的数（.tolist()、.item()、int(...)）自己算；它把 q、k、v、valid 全部 tolist 后用 Python 循环算注意力。
# 判词里要有：tolist
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

import math
def padded_attention(q, k, v, valid):
    Q, K, V, M = q.tolist(), k.tolist(), v.tolist(), valid.tolist()
    B, Hq, D = q.shape
    group = Hq // k.shape[2]
    res = []
    for b in range(B):
        rows = []
        for h in range(Hq):
            keys = [j for j in range(len(M[b])) if M[b][j]]
            s = [sum(a * c for a, c in zip(Q[b][h], K[b][j][h // group])) / math.sqrt(D) for j in keys]
            top = max(s)
            w = [math.exp(x - top) for x in s]
            t = sum(w)
            rows.append([sum(w[i] / t * V[b][j][h // group][e] for i, j in enumerate(keys)) for e in range(D)])
        res.append(rows)
    return torch.tensor(res, dtype=q.dtype)
