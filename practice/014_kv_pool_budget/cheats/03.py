# 作弊：num_layers 只查是不是 0（`if not num_layers`），负数的层数照样往下乘
# 为什么必须判错：题目要求 num_layers 小于 1 一律抛 ValueError；层数是负数时（比如配置里写错成 -28）它算出负的每 token 字节数，num_pages 再用负数去除预算，得到一个负的页数，KV 池的大小就成了垃圾值
# 判词里要有：num_layers 是坏的
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def kv_bytes_per_token(num_layers, num_kv_heads, head_dim, dtype, tp_size=1):
    if not num_layers:
        raise ValueError("num_layers 不能是 0")
    _check_positive(head_dim=head_dim)
    size = dtype_bytes(dtype)
    heads = local_kv_heads(num_kv_heads, tp_size)
    return 2 * num_layers * heads * head_dim * size
