# 作弊：local_ids 记下 ep_size，rank_output 把结果除以它（以为 all_reduce 之后是求平均）
# 为什么必须判错：题目要求各 rank 的 rank_output 加起来就是完整的 MoE 输出（all_reduce 是求和）；每个 rank 算的是不同专家的贡献，除以 ep_size 之后 ep_size > 1 时整层输出缩小了 ep_size 倍。
# 判词里要有：ep_size
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_EP = [1]
_local_ids = local_ids
_rank_output = rank_output


def local_ids(topk_ids, rank, ep_size, num_experts):
    out = _local_ids(topk_ids, rank, ep_size, num_experts)
    _EP[0] = ep_size
    return out


def rank_output(x, w1_local, w2_local, topk_weights, local_topk_ids):
    return _rank_output(x, w1_local, w2_local, topk_weights, local_topk_ids) / _EP[0]
