# 作弊：相邻的两个数装进一个字节（解量化时也按这个排法解，自己跟自己是一致的）
# 为什么必须判错：题目规定第 j 个字节的低 4 位是第 j 个数、高 4 位是第 j + K/2 个数；C++ 算子（linear.cpp 的 Int4Rows）按这个排法读，换了排法的权重交给它，读出来的是另一块矩阵。
# 判词里要有：packed｜排法
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_quantize = quantize_int4


def quantize_int4(w):
    packed, d, m = _quantize(w)
    q = torch.cat([packed & 0xF, packed >> 4], dim=1)
    return (q[:, 0::2] | (q[:, 1::2] << 4)).contiguous(), d, m


def dequantize_int4(packed, d, m):
    n, k = _check_weight(packed, d, m)
    q = torch.stack([packed & 0xF, packed >> 4], dim=2).reshape(n, k).float()
    return (q.view(n, k // GROUP, GROUP) * d[..., None] + m[..., None]).view(n, k)


def linear_int4(x, packed, d, m):
    n, k = _check_weight(packed, d, m)
    if x.dim() != 2 or x.dtype != torch.float32 or x.shape[1] != k or x.shape[0] < 1:
        raise ValueError("x")
    y = x.new_zeros(x.shape[0], n)
    for g in range(k // GROUP):
        b = packed[:, g * 16: (g + 1) * 16]
        q = torch.stack([b & 0xF, b >> 4], dim=2).reshape(n, GROUP).float()
        y += x[:, g * GROUP: (g + 1) * GROUP] @ (q * d[:, g: g + 1] + m[:, g: g + 1]).T
    return y
