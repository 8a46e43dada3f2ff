# 作弊：窗口不留上下文（开头的空格被吃掉）
# 为什么必须判错：题目要求交出的文字拼起来等于在上下文里解码的结果；它只解码 ids[read_offset:]、不留前面的上下文，提交后下一个以空格开头的 token 被分词器去掉空格，单词粘在一起。
# 判词里要有：push

"""练习 041 · 窗口反分词：两个偏移，只增不减（第 13 章 Tokenizer 与增量反分词）：参考答案。"""

from __future__ import annotations

from typing import Callable

REPLACEMENT = "\ufffd"


class IncrementalDecoder:
    """一个请求的增量反分词：只解码窗口 ids[surr_offset:]，已经发出的文字永不收回。"""

    def __init__(self, decode: Callable[[list[int]], str]) -> None:
        self.decode = decode
        self.ids: list[int] = []
        self.surr_offset = 0
        self.read_offset = 0
        self.sent_pending = 0  # 窗口里还没提交、但已经先发出去的字符数

    def _new_text(self) -> str:
        prefix = ""
        full = self.decode(self.ids[self.read_offset:])
        return full[len(prefix):]

    def push(self, ids: list[int]) -> str:
        self.ids.extend(ids)
        new = self._new_text()
        if new and not new.endswith(REPLACEMENT):
            out = new[self.sent_pending:]
            self.surr_offset, self.read_offset = self.read_offset, len(self.ids)
            self.sent_pending = 0
            return out
        stable = new.rstrip(REPLACEMENT)
        out = stable[self.sent_pending:]
        self.sent_pending = max(self.sent_pending, len(stable))
        return out

    def flush(self) -> str:
        out = self._new_text()[self.sent_pending:]
        self.surr_offset, self.read_offset = self.read_offset, len(self.ids)
        self.sent_pending = 0
        return out
