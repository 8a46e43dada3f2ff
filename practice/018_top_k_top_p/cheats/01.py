# 作弊：先 top-p 再 top-k
# 为什么必须判错：题目要求先按 top_k 截断、在留下的 token 里重新归一化后再做 top_p；它在全部词表的概率上先做 top-p 再截 top-k，k、p 同时开启时留下的集合和参考实现不一样。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def top_k_top_p_filter(logits, top_k, top_p):
    _check_arguments(logits, top_k, top_p)
    B, V = logits.shape
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)
    rank = torch.arange(V).expand(B, V)
    probs = torch.softmax(sorted_logits.double(), dim=-1)
    ahead = torch.cumsum(probs, dim=-1) - probs
    ahead[:, 0] = 0.0
    p = top_p.double()[:, None]
    keep = (p >= 1) | (ahead < p)
    k = torch.where((top_k < 0) | (top_k >= V), V, top_k).to(rank.dtype)
    keep &= rank < k[:, None]
    keep_by_id = torch.zeros_like(keep).scatter(1, order, keep)
    return logits.masked_fill(~keep_by_id, float("-inf"))
