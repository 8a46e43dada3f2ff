# 作弊：整块权重解成 bfloat16 的 [N, K]（只有 float32 的一半大）再乘
# 为什么必须判错：题目要求不造出整块的 [N, K]；换成半精度，整块还是 2·N·K 字节，每次调用照样多写多读一遍，而且 bfloat16 只有 8 位尾数，量化之外又丢了精度。
# 判词里要有：字节｜数值不对
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def linear_int4(x, packed, d, m):
    n, k = _check_weight(packed, d, m)
    if x.dim() != 2 or x.dtype != torch.float32 or x.shape[1] != k or x.shape[0] < 1:
        raise ValueError("x")
    w = torch.empty(n, k, dtype=torch.bfloat16)
    for g in range(0, n, 16):
        w[g: g + 16] = dequantize_int4(packed[g: g + 16], d[g: g + 16], m[g: g + 16]).to(torch.bfloat16)
    return (x.to(torch.bfloat16) @ w.T).float()
