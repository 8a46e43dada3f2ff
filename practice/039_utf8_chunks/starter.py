"""练习 039 · 字节块的增量 UTF-8 解码（第 13 章 Tokenizer 与增量反分词）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


class Utf8Stream:
    """字节一块一块地到，交出已经完整的字符，半个字留到下一块。"""

    def __init__(self) -> None:
        raise NotImplementedError

    def feed(self, chunk: bytes) -> str:
        """收下一块，返回这一块让它凑齐的所有字符（可以是空串）。"""
        raise NotImplementedError

    @property
    def pending(self) -> int:
        """手里还没凑成字符的字节数。"""
        raise NotImplementedError

    def finish(self) -> str:
        """流结束：没有剩下的字节返回 ""，有就返回一个 "\ufffd" 并清空。"""
        raise NotImplementedError
