# 作弊：长度用小端
# 为什么必须判错：题目要求长度是 4 字节无符号大端（int.to_bytes(4, "big")）；它的 frame 用小端写长度，非空消息的前缀字节顺序反了，和参考逐字节比较不一样，自己的 Deframer 也解不开。
# 判词里要有：大端

"""练习 037 的参考答案。"""

from __future__ import annotations

HEADER = 4  # 长度前缀的字节数：无符号、大端


def frame(payloads: list[bytes]) -> bytes:
    out = bytearray()
    for payload in payloads:
        if len(payload) >= 1 << (8 * HEADER):
            raise ValueError(f"消息有 {len(payload)} 字节，4 字节的长度放不下")
        out += len(payload).to_bytes(HEADER, "little")
        out += payload
    return bytes(out)


class Deframer:
    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buffer += chunk
        done = []
        while len(self._buffer) >= HEADER:
            size = int.from_bytes(self._buffer[:HEADER], "big")
            if len(self._buffer) < HEADER + size:
                break  # 这条还没收全
            done.append(bytes(self._buffer[HEADER:HEADER + size]))
            del self._buffer[:HEADER + size]
        return done

    @property
    def pending(self) -> int:
        return len(self._buffer)
