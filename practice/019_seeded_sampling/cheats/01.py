# 作弊：先过滤再除以温度
# 为什么必须判错：题目要求频率符合 softmax(过滤(logits / T))：先除以温度再做 top-k/top-p；它先在原 logits 上过滤再除温度，温度不是 1 时 top-p 留下的集合不同，卡方检验对不上。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def sample(logits, temperatures, top_k, top_p, generator):
    if logits.dim() != 2 or tuple(temperatures.shape) != (logits.shape[0],):
        raise ValueError("形状不对")
    if not bool((temperatures >= 0).all()):
        raise ValueError("温度不对")
    greedy = (temperatures == 0) | (top_k == 1)
    out = logits.argmax(dim=-1)
    rows = (~greedy).nonzero().flatten()
    if rows.numel() > 0:
        x = top_k_top_p_filter(logits[rows].float(), top_k[rows], top_p[rows])
        probs = torch.softmax(x / temperatures[rows, None].float(), dim=-1)
        out[rows] = torch.multinomial(probs, 1, generator=generator).squeeze(1)
    return out
