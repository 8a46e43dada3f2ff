# 作弊：掩码左上角对齐（tril）
# 为什么必须判错：它绕过了这道题的要点（掩码左上角对齐（tril）），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def causal_mask(cached_len, device_len):
    _check_span(cached_len, device_len)
    return [[1 if j <= i else 0 for j in range(device_len)] for i in range(device_len - cached_len)]
