# 作弊：对每个 rank 照样调用 local_lookup，却把结果扔掉，返回拼回整张表查出来的结果
# 为什么必须判错：题目要求返回的正是各 rank 的 local_lookup 结果之和（all-reduce）；扔掉它们另算一遍，等于每个 rank 都持有整张表，测试在每份返回值上做的记号不会出现在结果里。
# 判词里要有：记号
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def vocab_parallel_embedding(ids, shards):
    if not shards or any(s.shape != shards[0].shape for s in shards):
        raise ValueError("shards 不对")
    per = shards[0].shape[0]
    for rank, shard in enumerate(shards):
        local_lookup(ids, shard, rank * per)
    return F.embedding(ids, torch.cat(shards))
