# 作弊：pack_row 对，unpack_row 把高低 4 位拆反了（先排高 4 位）
# 为什么必须判错：题目要求 unpack_row 是 pack_row 的逆；拆反了，一行的前一半和后一半权重对调，这一层的输出全错，而且量化误差的检查根本看不出来。
# 判词里要有：unpack_row
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def unpack_row(data):
    if not data or len(data) % GROUP:
        raise ValueError("字节数")
    return [b >> 4 for b in data] + [b & 0xF for b in data]
