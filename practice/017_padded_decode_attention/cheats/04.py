# 作弊：decode_attention 按请求各调一次 padded_attention
# 为什么必须判错：题目要求 decode_attention 整批只调用一次 padded_attention（一次 SDPA）；它按请求逐个补齐、逐个调用，批里有几个请求 SDPA 就调用几次。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def decode_attention(q, k_buf, v_buf, page_table, table_idx, seq_lens):
    outs = []
    for b in range(q.shape[0]):
        k, v, valid = gather_padded(k_buf, v_buf, page_table, table_idx[b : b + 1], seq_lens[b : b + 1])
        outs.append(padded_attention(q[b : b + 1], k, v, valid))
    if len(table_idx) != q.shape[0] or len(seq_lens) != q.shape[0] or q.shape[1] % k_buf.shape[1]:
        raise ValueError("参数不对")
    return torch.cat(outs)
