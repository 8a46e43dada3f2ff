# 作弊：weight 的维数只查“至少二维”（`weight.dim() < 2` 才报错），三维的 weight 照样切
# 为什么必须判错：题目要求 weight 不是二维的 [out, in] 就抛 ValueError；传进来一个三维张量（比如 [out, in, 2]）多半是把别的东西当成了权重，它却按第 0 / 1 维切下去，返回一个三维的“分片”，到了 x @ W.T 才以莫名其妙的形状出错，或者悄悄算出别的东西
# 判词里要有：weight 是坏的
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _check_split(weight, dim, rank, size):
    if weight.dim() < 2:
        raise ValueError(f"weight 至少要是二维的，现在的形状是 {tuple(weight.shape)}")
    if size <= 0:
        raise ValueError(f"size 必须是正数，现在是 {size}")
    if not (0 <= rank < size):
        raise ValueError(f"rank 必须在 [0, {size}) 里，现在是 {rank}")
    if weight.shape[dim] % size != 0:
        raise ValueError(f"第 {dim} 维的 {weight.shape[dim]} 不能被 size={size} 整除")
    return weight.shape[dim] // size
