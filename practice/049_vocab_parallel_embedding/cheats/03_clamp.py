# 作弊：块外的 id 不置零，只是夹到块的两头（clamp），这样查表不会越界
# 为什么必须判错：题目要求不归这个 rank 管的 id 输出全零行；夹到边上以后它们查出第 0 行或最后一行，all-reduce 时每个 token 多加了别的 rank 的行，结果完全不对。
# 判词里要有：clamp
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def local_lookup(ids, shard, start):
    return F.embedding((ids - start).clamp(0, shard.shape[0] - 1), shard)
