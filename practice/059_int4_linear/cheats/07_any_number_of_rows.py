# 作弊：linear_int4 不查 x 的行数，多少行都照样按组循环
# 为什么必须判错：题目要求 x 超过 8 行抛 ValueError：行多时矩阵乘是算力活，边解边乘的 GEMV 比 torch 的 GEMM 慢得多，引擎要在这里换路（quant.py 的 SMALL_BATCH）；悄悄接下来，prefill 就慢了几倍。
# 判词里要有：ValueError
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_linear = linear_int4


def linear_int4(x, packed, d, m):
    if x.dim() == 2 and x.shape[0] > MAX_ROWS:
        return torch.cat([_linear(x[i: i + MAX_ROWS], packed, d, m) for i in range(0, x.shape[0], MAX_ROWS)])
    return _linear(x, packed, d, m)
