# 作弊：直接除以 d，不管全都相等的组
# 为什么必须判错：题目要求全都相等的组 d = 0、q 全是 0；真实的权重里有整组都是 0 的地方（被剪枝的、padding 的行），除以 0 会让量化整个模型时当场崩掉。
# 判词里要有：ZeroDivisionError｜全都相等
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def quantize_group(values):
    if len(values) != GROUP:
        raise ValueError("一组要 32 个数")
    m = float(min(values))
    d = (float(max(values)) - m) / 15
    return d, m, [min(15, max(0, round((w - m) / d))) for w in values]
