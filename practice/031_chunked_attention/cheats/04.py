# 作弊：峰值只看最后一块
# 为什么必须判错：它绕过了这道题的要点（峰值只看最后一块），只在测试没查到的地方才“对”。
# 判词里要有：peak_score_elements
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def peak_score_elements(n, chunk, num_heads):
    chunks = _chunks(n, chunk)
    s, e = chunks[-1]
    return num_heads * (e - s) * e
