# 作弊：后面的列填 kv_indices 的最后一列，前 K 列照抄
# 为什么必须判错：题目说补齐位置上的 kv_indices 是任意的数；比最长的请求短的那些行，最后一列是垃圾槽位（可能是没写过的 nan）。
# 判词里要有：static_indices
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def fill_static_metadata(kv_indices, key_mask, static_indices, static_mask):
    B, K = kv_indices.shape
    W = static_indices.shape[1]
    static_indices[:, :K] = kv_indices
    static_indices[:, K:] = kv_indices[:, -1:].expand(B, W - K)
    static_mask.fill_(False)
    static_mask[:, :K] = key_mask
