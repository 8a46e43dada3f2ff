"""练习 041 · 窗口反分词：两个偏移，只增不减（第 13 章 Tokenizer 与增量反分词）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

from typing import Callable


class IncrementalDecoder:
    """一个请求的增量反分词：只解码窗口 ids[surr_offset:]，已经发出的文字永不收回。"""

    def __init__(self, decode: Callable[[list[int]], str]) -> None:
        self.decode = decode  # decode(ids) -> str，是这道题唯一能用的分词器
        raise NotImplementedError

    def push(self, ids: list[int]) -> str:
        """追加一个或几个 token，返回新变稳定的文字。"""
        raise NotImplementedError

    def flush(self) -> str:
        """流结束：交出剩下的全部（末尾的半个字变成一个 "\ufffd"）。"""
        raise NotImplementedError
