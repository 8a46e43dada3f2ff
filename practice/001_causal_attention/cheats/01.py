# 作弊：SDPA 的 is_causal（左上角对齐）
# 为什么必须判错：题目要求右下角对齐的因果掩码（第 i 个 query 看到 j <= m-n+i）；is_causal=True 是左上角对齐，有缓存（n < m）和 decode（n = 1）时前面的查询看不到该看的 key，只有 n == m 时才对。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def attention(q, k, v):
    import torch.nn.functional as F
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1).transpose(0, 1)
    v = v.repeat_interleave(group, dim=1).transpose(0, 1)
    return F.scaled_dot_product_attention(q.transpose(0, 1), k, v, is_causal=True).transpose(0, 1)
