# 作弊：rank_output 先把本 rank 的那几格权重重新归一化（加起来等于 1）再乘
# 为什么必须判错：题目要求乘的就是 topk_weights[m, j]：权重在路由时已经对全部 k 格定好了，一个 token 的 k 个专家分在几个 rank 上时，各自重新归一化会让每个 rank 的那份都变大，all_reduce 之后不等于原来的加权和。
# 判词里要有：归一化
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_rank_output = rank_output


def rank_output(x, w1_local, w2_local, topk_weights, local_topk_ids):
    local_sum = (topk_weights * (local_topk_ids >= 0)).sum(dim=1, keepdim=True).clamp_min(1e-30)
    return _rank_output(x, w1_local, w2_local, topk_weights / local_sum, local_topk_ids)
