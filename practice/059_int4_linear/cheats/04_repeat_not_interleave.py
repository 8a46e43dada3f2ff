# 作弊：解量化时 d、m 用 repeat(1, 32) 展开到 [N, K]
# 为什么必须判错：题目要求第 g 组的 32 个数用 d[:, g]；repeat 把整行 [d0, d1, …] 重复 32 遍，第 j 个数用到的是 d[:, j % (K/32)]，除了第 0 个数，几乎每个权重的刻度都错了。
# 判词里要有：repeat
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def dequantize_int4(packed, d, m):
    n, k = _check_weight(packed, d, m)
    q = torch.cat([packed & 0xF, packed >> 4], dim=1).float()
    return q * d.repeat(1, GROUP) + m.repeat(1, GROUP)
