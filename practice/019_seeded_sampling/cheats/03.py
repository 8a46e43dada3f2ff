# 作弊：用全局随机数（不传 generator）
# 为什么必须判错：它绕过了这道题的要点（用全局随机数（不传 generator）），只在测试没查到的地方才“对”。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_sample = sample
def sample(logits, temperatures, top_k, top_p, generator):
    return _orig_sample(logits, temperatures, top_k, top_p, None)
