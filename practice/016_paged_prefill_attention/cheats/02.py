# 作弊：不查页表，当作槽位从 0 开始连续
# 为什么必须判错：它绕过了这道题的要点（不查页表，当作槽位从 0 开始连续），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def paged_prefill_attention(q, k_buf, v_buf, page_table, table_idx, cached_lens, extend_lens):
    _check_arguments(q, k_buf, page_table, table_idx, cached_lens, extend_lens)
    group = q.shape[1] // k_buf.shape[1]
    out, start = torch.empty_like(q), 0
    for row, cached, ext in zip(table_idx, cached_lens, extend_lens):
        total = cached + ext
        base = int(page_table[row, 0])
        k = k_buf[base : base + total].repeat_interleave(group, dim=1).transpose(0, 1)
        v = v_buf[base : base + total].repeat_interleave(group, dim=1).transpose(0, 1)
        mask = torch.arange(total)[None, :] <= torch.arange(cached, total)[:, None]
        o = F.scaled_dot_product_attention(q[start : start + ext].transpose(0, 1), k, v, attn_mask=mask)
        out[start : start + ext] = o.transpose(0, 1)
        start += ext
    return out
