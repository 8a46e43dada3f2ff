# 作弊：不分出贪心行：温度 0 换成极小的数，全部抽样
# 为什么必须判错：它绕过了这道题的要点（不分出贪心行：温度 0 换成极小的数，全部抽样），只在测试没查到的地方才“对”。
# 判词里要有：贪心
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def sample(logits, temperatures, top_k, top_p, generator):
    if logits.dim() != 2 or tuple(temperatures.shape) != (logits.shape[0],):
        raise ValueError("形状不对")
    if not bool((temperatures >= 0).all()):
        raise ValueError("温度不对")
    t = temperatures.float().clamp(min=1e-6)
    x = top_k_top_p_filter(logits.float() / t[:, None], top_k, top_p)
    return torch.multinomial(torch.softmax(x, -1), 1, generator=generator).squeeze(1)
