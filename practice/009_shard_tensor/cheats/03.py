# 作弊：o_proj / down_proj 只挡一维的 weight（`if value.dim() == 1`），三维的照样按第 1 维切
# 为什么必须判错：行并行切的是二维 weight 的输入维；三维的张量不是这两个模块的 weight，按第 1 维切出来的东西形状对不上任何一个 rank 的 Linear，加载时才会在别处莫名其妙地出错。题目说给了二维以外的都抛 ValueError，旧测试只拿一维的试过
# 判词里要有：value 是坏的
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def shard_tensor(key, value, rank, size, num_kv_heads):
    if size <= 0 or not (0 <= rank < size):
        raise ValueError("rank / size 不对")
    parts = key.split(".")
    module = parts[-2] if len(parts) >= 2 else ""
    if module in SPLIT_DIM0:
        return _even_slice(value, 0, rank, size, key)
    if module in SPLIT_KV:
        return _kv_slice(value, rank, size, num_kv_heads, key)
    if module in SPLIT_DIM1:
        if value.dim() == 1:
            raise ValueError("行并行的权重不能是一维的")
        return _even_slice(value, 1, rank, size, key)
    if module in SPLIT_VOCAB:
        return _vocab_slice(value, rank, size)
    return value
