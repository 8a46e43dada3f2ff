# 作弊：不检查掩码是不是“前 n 个 True”，只数 True 的个数
# 为什么必须判错：题目要求这样的掩码抛 ValueError；中间有洞的掩码说明元数据已经坏了，按个数重新排会悄悄换掉请求看见的 key。
# 判词里要有：ValueError
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_fill = fill_static_metadata


def fill_static_metadata(kv_indices, key_mask, static_indices, static_mask):
    if key_mask.dtype == torch.bool and key_mask.dim() == 2:
        n = key_mask.sum(dim=1)
        key_mask = torch.arange(key_mask.shape[1]) < n[:, None]
    _fill(kv_indices, key_mask, static_indices, static_mask)
