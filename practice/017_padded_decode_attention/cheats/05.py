# 作弊：seq_lens 只查最后一个（旧测试的坏长度都放在末尾）
# 为什么必须判错：长度为 0 的请求一个 key 都没有，softmax 的分母是 0；比页表还长的请求，页表里根本没有它后面那些位置的槽位。哪个请求坏都一样坏，不会只坏在最后一个；只看末尾，前面的坏请求就混进了一批里，算出来的是没有意义的数（或者在后面哪一步莫名其妙地崩掉）
# 判词里要有：seq_lens 是坏的
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def decode_attention(q, k_buf, v_buf, page_table, table_idx, seq_lens):
    B = q.shape[0]
    if len(table_idx) != B or len(seq_lens) != B:
        raise ValueError("table_idx、seq_lens 和 q 的行数对不上")
    if B and not (1 <= seq_lens[-1] <= page_table.shape[1]):
        raise ValueError("seq_lens 不对")
    if q.shape[1] % k_buf.shape[1] != 0:
        raise ValueError("query 头数不是 KV 头数的倍数")
    return padded_attention(q, *gather_padded(k_buf, v_buf, page_table, table_idx, seq_lens))
