# 作弊：q 用 int() 截掉小数，不四舍五入
# 为什么必须判错：题目要求 q = round((w - m) / d)：截断让每个数都往 m 那边偏，最坏差一整个刻度 d，超过了四舍五入保证的 d / 2；整个模型的权重都系统性地偏小一点。
# 判词里要有：q｜d / 2
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def quantize_group(values):
    if len(values) != GROUP:
        raise ValueError("一组要 32 个数")
    m = float(min(values))
    d = (float(max(values)) - m) / 15
    return d, m, [min(15, int((w - m) / max(d, 1e-30))) for w in values]
