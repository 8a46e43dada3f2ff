# 作弊：不分块，一次算完
# 为什么必须判错：题目要求按 chunk 一块一块地调用 attend；它不分块、整段一次算完，chunk < n 时 attend 只被调用一次、分数矩阵是 [n, n]，和记下的调用形状对不上。
# 判词里要有：一块一块
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_chunked = chunked_attention
def chunked_attention(q, k, v, chunk, attend):
    if chunk < 1:
        raise ValueError("chunk 至少是 1")
    return _orig_chunked(q, k, v, max(q.shape[0], 1), attend)
