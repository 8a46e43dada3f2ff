# 作弊：交出完整张量的视图（第 3 章 _own 修掉的 bug）
# 为什么必须判错：题目要求切出来的块是独立的内存、不是 value 的视图；按第 0 维切出的一段本来就连续，.contiguous() 原样返回视图，q_proj/k_proj 等行切分（含 size = 1）交出的都是完整张量的视图。
# 判词里要有：视图
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _own(piece):
    return piece.contiguous()
