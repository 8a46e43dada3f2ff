# 作弊：先 top-p 再 top-k
# 为什么必须判错：它绕过了这道题的要点（先 top-p 再 top-k），只在测试没查到的地方才“对”。
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
