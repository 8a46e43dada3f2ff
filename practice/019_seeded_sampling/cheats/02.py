# 作弊：不分出贪心行：温度 0 换成极小的数，全部抽样
# 为什么必须判错：题目要求贪心行（温度 0 或 top_k 为 1）正好取 argmax、不抽随机数；它把温度 0 换成极小的数照样抽样，并列最大的 logits 之间会随机选，不一定是 id 最小的那个，测试查贪心行时露馅。
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
