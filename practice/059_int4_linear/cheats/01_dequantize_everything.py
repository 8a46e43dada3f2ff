# 作弊：linear_int4 先把整块权重解成 float32 的 [N, K]，再交给矩阵乘
# 为什么必须判错：题目要求不造出整块的 [N, K]：decode 的线性层本来就是读内存的活，先解出 4·N·K 字节再读一遍，比直接用 float32 的权重还慢，量化省下的带宽全赔进去了。
# 判词里要有：字节
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def linear_int4(x, packed, d, m):
    n, k = _check_weight(packed, d, m)
    if x.dim() != 2 or x.dtype != torch.float32 or x.shape[1] != k or x.shape[0] < 1:
        raise ValueError("x")
    return x @ dequantize_int4(packed, d, m).T
