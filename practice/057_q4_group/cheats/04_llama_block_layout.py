# 作弊：按 llama.cpp 的 Q4_1 排法，在每组 32 个数的 16 个字节里排（低 4 位第 t 个、高 4 位第 t + 16 个）
# 为什么必须判错：题目规定的是本书的排法（整行对半：第 j 个字节装第 j 个和第 j + K/2 个数），linear.cpp 的 Int4Rows 就按它解；两种排法只在 K = 32 时才一样，这里 K 至少 64。
# 判词里要有：pack_row
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_pack_checked = pack_row


def pack_row(q):
    _pack_checked(q)
    out = []
    for g in range(0, len(q), 32):
        out += [q[g + t] | (q[g + t + 16] << 4) for t in range(16)]
    return bytes(out)


def unpack_row(data):
    if not data or len(data) % GROUP:
        raise ValueError("字节数")
    out = []
    for g in range(0, len(data), 16):
        block = data[g:g + 16]
        out += [b & 0xF for b in block] + [b >> 4 for b in block]
    return out
