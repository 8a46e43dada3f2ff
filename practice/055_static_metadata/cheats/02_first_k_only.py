# 作弊：只写前 K 列，后面的列保留上一次的内容
# 为什么必须判错：题目要求 W 列都写；上一次更长的批在后面留下的掩码是 True、槽位指向别的请求或没写过的地方，这一步的注意力就会看见它们。
# 判词里要有：static_mask｜static_indices
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_fill = fill_static_metadata


def fill_static_metadata(kv_indices, key_mask, static_indices, static_mask):
    K = kv_indices.shape[1]
    head_i, head_m = static_indices[:, :K].clone(), static_mask[:, :K].clone()
    _fill(kv_indices, key_mask, head_i, head_m)
    static_indices[:, :K] = head_i
    static_mask[:, :K] = head_m
