# 作弊：补齐的位置一律填槽位 0
# 为什么必须判错：题目要求填这一行最后一个真实 key 的槽位；槽位 0 可能从没写过，里面是 nan，掩码遮掉的位置权重是 0，可 0 × nan 还是 nan。
# 判词里要有：static_indices｜nan
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_fill = fill_static_metadata


def fill_static_metadata(kv_indices, key_mask, static_indices, static_mask):
    _fill(kv_indices, key_mask, static_indices, static_mask)
    static_indices[~static_mask] = 0
