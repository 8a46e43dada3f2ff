# 作弊：在 torch._C._DisableTorchDispatch() 里解出整块权重，躲开 aten 这一层的测量
# 为什么必须判错：题目要求 linear_int4 不造出整块的 [N, K]；关掉分发的钩子不改变它做了什么：整块 4·N·K 字节照样写一遍、读一遍，只是不让评测看见。
# 判词里要有：字节
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def linear_int4(x, packed, d, m):
    n, k = _check_weight(packed, d, m)
    if x.dim() != 2 or x.dtype != torch.float32 or x.shape[1] != k or x.shape[0] < 1:
        raise ValueError("x")
    with torch._C._DisableTorchDispatch():
        return x @ dequantize_int4(packed, d, m).T
