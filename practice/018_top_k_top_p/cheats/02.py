# 作弊：top-p 把越过 p 的那个 token 也扔掉
# 为什么必须判错：题目要求 top-p 留下“前面的概率之和 < p”的 token，越过 p 的那个也要留下；它只留累积概率 <= p 的，把恰好越过 p 的那个 token 也扔掉了，开了 top-p 的行少留一个。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def top_k_top_p_filter(logits, top_k, top_p):
    _check_arguments(logits, top_k, top_p)
    B, V = logits.shape
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)
    rank = torch.arange(V).expand(B, V)
    k = torch.where((top_k < 0) | (top_k >= V), V, top_k).to(rank.dtype)
    keep = rank < k[:, None]
    probs = torch.softmax(sorted_logits.masked_fill(~keep, float("-inf")).double(), dim=-1)
    upto = torch.cumsum(probs, dim=-1)
    p = top_p.double()[:, None]
    keep &= (p >= 1) | (upto <= p)
    keep[:, 0] = True
    keep_by_id = torch.zeros_like(keep).scatter(1, order, keep)
    return logits.masked_fill(~keep_by_id, float("-inf"))
