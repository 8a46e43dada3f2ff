# 作弊：vocab_parallel_embedding 把各 rank 的分片拼回整张表，直接 F.embedding，不调用 local_lookup
# 为什么必须判错：题目要求每个 rank 只用自己的分片对整批 ids 查一次、再把结果加起来；真的多卡时没有哪个 rank 有整张表（这正是切词表的原因：151936 × 1024 的表要分着放），测试数 local_lookup 的调用次数时就露馅。
# 判词里要有：一次也没有调用 local_lookup
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def vocab_parallel_embedding(ids, shards):
    if not shards or any(s.shape != shards[0].shape for s in shards):
        raise ValueError("shards 不对")
    return F.embedding(ids, torch.cat(shards))
