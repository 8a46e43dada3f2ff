# 作弊：只查最后一条消息的长度放不放得下
# 为什么必须判错：放不下的消息可以在列表的任何位置，只查最后一条的 frame 会把错的长度前缀悄悄写出去。
# 判词里要有：ValueError
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def frame(payloads):
    if payloads and len(payloads[-1]) >= 1 << (8 * HEADER):
        raise ValueError("放不下")
    out = bytearray()
    for payload in payloads:
        out += (len(payload) & 0xFFFFFFFF).to_bytes(HEADER, "big")
        out += payload
    return bytes(out)
