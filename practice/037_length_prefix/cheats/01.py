# 作弊：假设每一块里至少有完整的 4 字节长度
# 为什么必须判错：题目要求块的边界可以落在长度的 4 个字节中间，不完整的留到下一块；它把不足 4 字节、凑不出消息的短块当成噪声扔掉，1 个字节一块地喂时长度前缀丢了，切出来的消息不对。
# 判词里要有：不对
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

class Deframer:
    def __init__(self):
        self._buffer = b""

    def feed(self, chunk):
        done = []
        size = int.from_bytes(chunk[:HEADER], "big") if not self._buffer else None
        self._buffer += chunk
        while len(self._buffer) >= HEADER:
            size = int.from_bytes(self._buffer[:HEADER], "big")
            if len(self._buffer) < HEADER + size:
                break
            done.append(bytes(self._buffer[HEADER:HEADER + size]))
            self._buffer = self._buffer[HEADER + size:]
        if len(self._buffer) < HEADER and done == [] and len(chunk) < HEADER:
            self._buffer = b""  # 半截的长度当成噪声扔掉
        return done

    @property
    def pending(self):
        return len(self._buffer)
