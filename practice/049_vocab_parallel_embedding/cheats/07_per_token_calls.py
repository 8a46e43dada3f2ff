# 作弊：vocab_parallel_embedding 逐个 token 调用 local_lookup（每个 rank、每个 token 一次），再拼起来
# 为什么必须判错：题目要求每个 rank 对整批 ids 只调用一次 local_lookup；按 token 调用就是在 Python 里循环，一个 prefill 批几千个 token 就是几千次调用，测试数调用次数时就露馅。
# 判词里要有：调用一次 local_lookup｜整批
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def vocab_parallel_embedding(ids, shards):
    if not shards or any(s.shape != shards[0].shape for s in shards):
        raise ValueError("shards 不对")
    per = shards[0].shape[0]
    flat = ids.reshape(-1)
    rows = []
    for t in range(flat.shape[0]):
        one = None
        for rank, shard in enumerate(shards):
            part = local_lookup(flat[t:t + 1], shard, rank * per)
            one = part if one is None else one + part
        rows.append(one)
    return torch.cat(rows).reshape(*ids.shape, shards[0].shape[1])
