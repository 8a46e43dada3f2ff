# 作弊：相邻的两个数装进一个字节（第 j 个字节装 q[2j] 和 q[2j+1]）
# 为什么必须判错：题目规定第 j 个字节的低 4 位是第 j 个数、高 4 位是第 j + K/2 个数；C++ 算子按这个排法解码，换一种排法它读出来的就是另一组权重。
# 判词里要有：pack_row
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_pack_checked = pack_row


def pack_row(q):
    _pack_checked(q)  # 只为了同样地检查参数
    return bytes(q[2 * j] | (q[2 * j + 1] << 4) for j in range(len(q) // 2))


def unpack_row(data):
    if not data or len(data) % GROUP:
        raise ValueError("字节数")
    return [x for b in data for x in (b & 0xF, b >> 4)]
