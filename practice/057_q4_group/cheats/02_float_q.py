# 作弊：q 是 round(x, 0) 得来的 float（3.0 而不是 3）
# 为什么必须判错：题目要求 q 的每一项是 int：4 位整数要按位装进字节（q << 4、q | …），float 做不了位运算，pack_row 一拿到它就出错。
# 判词里要有：int
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def quantize_group(values):
    if len(values) != GROUP:
        raise ValueError("一组要 32 个数")
    m = float(min(values))
    d = (float(max(values)) - m) / 15
    return d, m, [min(15.0, max(0.0, round((w - m) / max(d, 1e-30), 0))) for w in values]
