"""练习 040 · 停止串：扣住可能的开头（第 13 章 Tokenizer 与增量反分词）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


class StopFilter:
    """流式文字经过它：停止串不发出去，可能是停止串开头的尾巴先扣住。"""

    def __init__(self, stops: list[str]) -> None:
        raise NotImplementedError

    def feed(self, piece: str) -> tuple[str, bool]:
        """收下新的一段，返回 (现在可以发出的文字, 是否已经命中停止串)。"""
        raise NotImplementedError

    def finish(self) -> str:
        """流结束：放出还扣着的文字（命中过就返回 ""）。"""
        raise NotImplementedError
