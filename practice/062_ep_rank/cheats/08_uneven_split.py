# 作弊：local_ids 不查 E 能不能被 ep_size 整除，每个 rank 放 E // ep_size 个专家
# 为什么必须判错：题目要求 num_experts % ep_size != 0 时抛 ValueError；按 E // ep_size 往下取整，最后几个专家哪个 rank 都不放，选中它们的格子在每个 rank 上都是 -1，这几个专家的贡献悄悄丢了。
# 判词里要有：ValueError
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def local_ids(topk_ids, rank, ep_size, num_experts):
    if ep_size < 1 or not 0 <= rank < ep_size:
        raise ValueError("坏参数")
    per = num_experts // ep_size
    local = topk_ids - rank * per
    return torch.where((local >= 0) & (local < per), local, -1)
