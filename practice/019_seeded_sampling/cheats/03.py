# 作弊：用全局随机数（不传 generator）
# 为什么必须判错：题目要求所有随机数都来自传进来的 generator；它用全局随机数，同一个种子两次结果不一样，打乱全局随机数也会改变结果。
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_sample = sample
def sample(logits, temperatures, top_k, top_p, generator):
    return _orig_sample(logits, temperatures, top_k, top_p, None)
