# 作弊：掩码左上角对齐（tril）
# 为什么必须判错：题目要求第 i 行第 j 列为 1 当且仅当 j <= cached_len + i（右下角对齐）；tril 是 j <= i，带缓存的 prefill 和 decode（cached_len > 0）时查询看不到缓存里的 key。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def causal_mask(cached_len, device_len):
    _check_span(cached_len, device_len)
    return [[1 if j <= i else 0 for j in range(device_len)] for i in range(device_len - cached_len)]
