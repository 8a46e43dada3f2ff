# 作弊：张量并行时仍按全部 KV 头算
# 为什么必须判错：题目要求每个 rank 只按本地 KV 头数（local_kv_heads）算字节数；它在 tp_size > 1 时仍按全部 KV 头算，每 token 的字节数大了、能放的页数少了，只有 TP=1 时碰巧对。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def kv_bytes_per_token(num_layers, num_kv_heads, head_dim, dtype, tp_size=1):
    _check_positive(num_layers=num_layers, head_dim=head_dim)
    local_kv_heads(num_kv_heads, tp_size)  # 只为参数检查
    return 2 * num_layers * num_kv_heads * head_dim * dtype_bytes(dtype)
