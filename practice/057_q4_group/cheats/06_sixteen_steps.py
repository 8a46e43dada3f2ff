# 作弊：d = (最大值 - 最小值) / 16，最大值量化成 16
# 为什么必须判错：题目要求 q 在 [0, 15] 里：4 位只装得下 0 到 15，16 装进半个字节就变成 0，最大的权重读回来成了最小值。
# 判词里要有：d｜[0, 15]
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def quantize_group(values):
    if len(values) != GROUP:
        raise ValueError("一组要 32 个数")
    m = float(min(values))
    d = (float(max(values)) - m) / 16
    return d, m, [round((w - m) / max(d, 1e-30)) for w in values]
