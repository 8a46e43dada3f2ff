# 作弊：不管温度和过滤，全部贪心
# 为什么必须判错：它绕过了这道题的要点（不管温度和过滤，全部贪心），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def sample(logits, temperatures, top_k, top_p, generator):
    if logits.dim() != 2 or tuple(temperatures.shape) != (logits.shape[0],):
        raise ValueError("形状不对")
    if not bool((temperatures >= 0).all()):
        raise ValueError("温度不对")
    return logits.argmax(dim=-1)
