# 作弊：按换行切，不用长度
# 为什么必须判错：题目要求每条消息前加 4 字节、大端的长度；它用换行分隔，frame 的结果和格式对不上，消息本身含换行时收件方还会切错。
# 判词里要有：4 字节、大端
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def frame(payloads):
    return b"".join(p + b"\n" for p in payloads)


class Deframer:
    def __init__(self):
        self._buffer = b""

    def feed(self, chunk):
        self._buffer += chunk
        *done, self._buffer = self._buffer.split(b"\n")
        return done

    @property
    def pending(self):
        return len(self._buffer)
