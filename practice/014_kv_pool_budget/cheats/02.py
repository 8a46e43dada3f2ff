# 作弊：最后不满一页的零头也算一页
# 为什么必须判错：题目要求预算能放下的整页数（向下取整）；它向上取整，剩下不够一整页的字节也多算一页，预算不是整页大小的倍数时页数多了 1，分出去的 KV 池超出预算。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_pages = num_pages
def num_pages(budget_bytes, num_layers, num_kv_heads, head_dim, dtype, page_size, tp_size=1):
    _orig_pages(budget_bytes, num_layers, num_kv_heads, head_dim, dtype, page_size, tp_size)
    per = kv_bytes_per_token(num_layers, num_kv_heads, head_dim, dtype, tp_size) * page_size
    return -(-budget_bytes // per)
