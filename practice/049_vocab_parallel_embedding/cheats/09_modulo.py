# 作弊：块外的 id 取模（(ids − start) % per）再查表：下标永远合法，也不用置零
# 为什么必须判错：题目要求块外的 id 输出全零行；取模以后它们查出了本分片里别的行，all-reduce 时每个 token 多加了 tp − 1 行不相干的向量。
# 判词里要有：取了模
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def local_lookup(ids, shard, start):
    return F.embedding((ids - start) % shard.shape[0], shard)
