# 作弊：先过滤再除以温度
# 为什么必须判错：它绕过了这道题的要点（先过滤再除以温度），只在测试没查到的地方才“对”。
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
