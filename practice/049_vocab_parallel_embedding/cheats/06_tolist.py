# 作弊：local_lookup 先 .tolist() 把 id 和分片都取回 Python，用列表推导式查表，再变回张量（torch 运算只有常数次）
# 为什么必须判错：题目要求不把张量里的数取回 Python；这样写在 GPU 上每次都要等 GPU 算完、整张分片拷回 CPU，CUDA 图也录不下来，运算次数虽然不增长，测试照样查出用了 tolist。
# 判词里要有：tolist
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def local_lookup(ids, shard, start):
    rows = shard.tolist()
    zero = [0.0] * shard.shape[1]
    per = shard.shape[0]
    out = [rows[i - start] if 0 <= i - start < per else zero for i in ids.reshape(-1).tolist()]
    return torch.tensor(out, dtype=shard.dtype).reshape(*ids.shape, shard.shape[1])
