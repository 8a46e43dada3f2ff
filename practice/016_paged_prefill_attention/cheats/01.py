# 作弊：SDPA 的 is_causal（左上角对齐）
# 为什么必须判错：题目要求每个请求的新 token 能看见全部缓存前缀（右下角对齐）；is_causal=True 是左上角对齐，带缓存、一次多个新 token 的请求会少看缓存里的 key，数值不对。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def paged_prefill_attention(q, k_buf, v_buf, page_table, table_idx, cached_lens, extend_lens):
    _check_arguments(q, k_buf, page_table, table_idx, cached_lens, extend_lens)
    group = q.shape[1] // k_buf.shape[1]
    out, start = torch.empty_like(q), 0
    for row, cached, ext in zip(table_idx, cached_lens, extend_lens):
        slots = page_table[row, : cached + ext]
        k = k_buf[slots].repeat_interleave(group, dim=1).transpose(0, 1)
        v = v_buf[slots].repeat_interleave(group, dim=1).transpose(0, 1)
        o = F.scaled_dot_product_attention(q[start : start + ext].transpose(0, 1), k, v, is_causal=True)
        out[start : start + ext] = o.transpose(0, 1)
        start += ext
    return out
