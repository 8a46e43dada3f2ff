# 作弊：复制时 rank r 拿 r % 头数
# 为什么必须判错：题目要求复制时连续的 tp_size // num_kv_heads 个 rank 共用一个头；r % 头数把相邻 rank 分到不同头，要复制且 num_kv_heads > 1 时（如 8 个头、TP=16）头号错了。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def kv_heads_of_rank(num_kv_heads, tp_size, tp_rank):
    local = div_even(num_kv_heads, tp_size, allow_replicate=True)
    if not (0 <= tp_rank < tp_size) or num_kv_heads <= 0:
        raise ValueError("bad")
    if num_kv_heads < tp_size:
        return [tp_rank % num_kv_heads]
    return list(range(tp_rank * local, (tp_rank + 1) * local))
