# 作弊：cached_len + extend_len 有没有超过页表的列数，只查第一个请求（旧测试超长的请求正好排在第一个）
# 为什么必须判错：超过页表列数的那个请求，不管排在第几个，都会拿页表外面的下标去取槽位（越界报错，或者读到别人的 K/V）；长度检查要对每个请求都做一遍
# 判词里要有：cached_lens 是坏的
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _check_arguments(q, k_buf, page_table, table_idx, cached_lens, extend_lens) -> None:
    if not (len(table_idx) == len(cached_lens) == len(extend_lens)):
        raise ValueError("三个列表的长度不一样")
    if sum(extend_lens) != q.shape[0]:
        raise ValueError("q 的行数和 extend_lens 之和对不上")
    if q.shape[1] % k_buf.shape[1] != 0:
        raise ValueError("query 头数不是 KV 头数的倍数")
    for cached, ext in zip(cached_lens, extend_lens):
        if cached < 0 or ext < 1:
            raise ValueError("cached_len 或 extend_len 不对")
    if cached_lens and cached_lens[0] + extend_lens[0] > page_table.shape[1]:
        raise ValueError("第一个请求超过了页表的列数")
