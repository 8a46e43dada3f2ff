"""练习 037 · 字节流里切出消息：长度前缀（第 12 章 消息、序列化与 ZMQ）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

HEADER = 4  # 长度前缀的字节数：无符号、大端


def frame(payloads: list[bytes]) -> bytes:
    """每条消息前面加 4 字节大端长度，依次拼起来。某条太长（放不进 4 字节）时抛 ValueError。"""
    raise NotImplementedError


class Deframer:
    """一块一块地收字节，交出已经完整的消息。"""

    def __init__(self) -> None:
        raise NotImplementedError

    def feed(self, chunk: bytes) -> list[bytes]:
        """收下一块，按顺序返回这一块让它凑齐的所有消息。"""
        raise NotImplementedError

    @property
    def pending(self) -> int:
        """还留在手里、没凑成消息的字节数。"""
        raise NotImplementedError
