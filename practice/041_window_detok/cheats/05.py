# 作弊：只在提交时发（稳定的字不先发）
# 为什么必须判错：题目要求每次 push 后能发的稳定文字马上发（末尾只去掉 "\ufffd"）；它只在窗口结尾完整、提交时才发，窗口末尾是半个字时前面已经稳定的字也扣着不发，不够尽早。
# 判词里要有：尽早

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
        prefix = self.decode(self.ids[self.surr_offset:self.read_offset])
        full = self.decode(self.ids[self.surr_offset:])
        return full[len(prefix):]

    def push(self, ids: list[int]) -> str:
        self.ids.extend(ids)
        new = self._new_text()
        if new and not new.endswith(REPLACEMENT):
            out = new[self.sent_pending:]
            self.surr_offset, self.read_offset = self.read_offset, len(self.ids)
            self.sent_pending = 0
            return out
        stable = ""
        out = stable[self.sent_pending:]
        self.sent_pending = max(self.sent_pending, len(stable))
        return out

    def flush(self) -> str:
        out = self._new_text()[self.sent_pending:]
        self.surr_offset, self.read_offset = self.read_offset, len(self.ids)
        self.sent_pending = 0
        return out
