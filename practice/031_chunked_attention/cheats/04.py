# 作弊：峰值只看最后一块
# 为什么必须判错：题目要求峰值是 num_heads × (e - s) × e 在各块上的最大值；它只看最后一块，最后一块不满 chunk（n 不是 chunk 的倍数）时倒数第二块更大，峰值算小了。
# 判词里要有：peak_score_elements
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def peak_score_elements(n, chunk, num_heads):
    chunks = _chunks(n, chunk)
    s, e = chunks[-1]
    return num_heads * (e - s) * e
