# 作弊：local_lookup 逐个 token 用 Python 循环：在块里就取那一行，不在就放一行零，最后 stack
# 为什么必须判错：题目要求整批一次算、运算次数不随 token 数增长；逐个 token 循环时每个 token 都要读一次 id（GPU 上每次都同步），一个 4096 token 的 prefill 就是几千次小运算，测试数 torch 运算的次数时就露馅。
# 判词里要有：取回了 Python｜随 token 数增长
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def local_lookup(ids, shard, start):
    flat = ids.reshape(-1)
    rows = []
    for i in range(flat.shape[0]):
        j = int(flat[i]) - start
        rows.append(shard[j] if 0 <= j < shard.shape[0] else shard.new_zeros(shard.shape[1]))
    if not rows:
        return shard.new_zeros(*ids.shape, shard.shape[1])
    return torch.stack(rows).reshape(*ids.shape, shard.shape[1])
