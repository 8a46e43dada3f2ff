# 作弊：每块照样调用一次 attend（调用记录看起来对），结果却扔掉，最后自己一次算完整个因果注意力
# 为什么必须判错：分块的要点是“每块的结果就是输出的那一块”；调用完扔掉、另算一份大的，分数矩阵照样是 n×n
# 判词里要有：记号
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_real_chunked = chunked_attention


def chunked_attention(q, k, v, chunk, attend):
    _real_chunked(q, k, v, chunk, attend)  # 只为了调用记录
    n = q.shape[0]
    group = q.shape[1] // k.shape[1]
    kk = k.repeat_interleave(group, dim=1).transpose(0, 1)
    vv = v.repeat_interleave(group, dim=1).transpose(0, 1)
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    out = torch.nn.functional.scaled_dot_product_attention(q.transpose(0, 1), kk, vv, attn_mask=mask)
    return out.transpose(0, 1)
