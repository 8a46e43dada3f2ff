# 作弊：pack_row 不检查 q 的每一项，16、-1、True 照样装
# 为什么必须判错：题目要求不在 [0, 15] 里的整数抛 ValueError；16 << 4 溢出到第 9 位（bytes() 报的是别的错或者悄悄进位），-1 的高位全是 1，会把同一个字节里的另一个数盖掉。
# 判词里要有：ValueError
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def pack_row(q):
    if not q or len(q) % 64:
        raise ValueError("长度")
    half = len(q) // 2
    return bytes((int(q[j]) | (int(q[j + half]) << 4)) & 0xFF for j in range(half))
