# 作弊：最后不满一页的零头也算一页
# 为什么必须判错：它绕过了这道题的要点（最后不满一页的零头也算一页），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_pages = num_pages
def num_pages(budget_bytes, num_layers, num_kv_heads, head_dim, dtype, page_size, tp_size=1):
    _orig_pages(budget_bytes, num_layers, num_kv_heads, head_dim, dtype, page_size, tp_size)
    per = kv_bytes_per_token(num_layers, num_kv_heads, head_dim, dtype, tp_size) * page_size
    return -(-budget_bytes // per)
