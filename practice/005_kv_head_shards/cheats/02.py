# 作弊：weight 的行数只查是不是 head_dim 的整数倍（能切成整头），不和 num_kv_heads * head_dim 比
# 为什么必须判错：题目要求 weight 的行数不等于 num_kv_heads * head_dim 就抛 ValueError；多了几个整头或少了几个整头的权重（比如 8 个头、head_dim=4 却给了 36 行或 28 行）说明调用方传错了张量，它却照样切：多出来的行被悄悄丢掉，行不够时后面几个 rank 切出来的块比该有的短，甚至是空的
# 判词里要有：weight 是坏的
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def shard_kv_weight(weight, num_kv_heads, head_dim, tp_size, tp_rank):
    if weight.dim() != 2 or weight.shape[0] % head_dim != 0:
        raise ValueError(f"weight 的行数 {weight.shape[0]} 不是 head_dim={head_dim} 的整数倍")
    heads = kv_heads_of_rank(num_kv_heads, tp_size, tp_rank)
    start, end = heads[0] * head_dim, (heads[-1] + 1) * head_dim
    return weight[start:end].clone()
