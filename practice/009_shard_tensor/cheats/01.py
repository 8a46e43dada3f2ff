# 作弊：交出完整张量的视图（第 3 章 _own 修掉的 bug）
# 为什么必须判错：它绕过了这道题的要点（交出完整张量的视图（第 3 章 _own 修掉的 bug）），只在测试没查到的地方才“对”。
# 判词里要有：视图
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _own(piece):
    return piece.contiguous()
