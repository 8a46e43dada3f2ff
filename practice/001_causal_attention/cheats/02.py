# 作弊：GQA 用 repeat 而不是 repeat_interleave
# 为什么必须判错：题目要求 query 头 h 用 KV 头 h // group（相邻头共用，同 repeat_interleave）；repeat 把 KV 头平铺成 h % Hkv，GQA 比例大于 1 且 Hkv > 1 时头配错了，输出不对。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_attention = attention
def attention(q, k, v):
    group = q.shape[1] // k.shape[1]
    n, m = q.shape[0], k.shape[0]
    k = k.repeat(1, group, 1)
    v = v.repeat(1, group, 1)
    scores = torch.einsum("nhd,mhd->hnm", q, k) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~causal_mask(n, m), float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v.transpose(0, 1)).transpose(0, 1)
