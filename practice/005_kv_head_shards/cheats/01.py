# 作弊：复制时 rank r 拿 r % 头数
# 为什么必须判错：它绕过了这道题的要点（复制时 rank r 拿 r % 头数），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def kv_heads_of_rank(num_kv_heads, tp_size, tp_rank):
    local = div_even(num_kv_heads, tp_size, allow_replicate=True)
    if not (0 <= tp_rank < tp_size) or num_kv_heads <= 0:
        raise ValueError("bad")
    if num_kv_heads < tp_size:
        return [tp_rank % num_kv_heads]
    return list(range(tp_rank * local, (tp_rank + 1) * local))
