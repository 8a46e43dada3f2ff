# 作弊：上游的可打印规矩（已发的字数会往回退）
# 为什么必须判错：题目要求每次 push 后交出的正好是稳定文本；它照上游的可打印规矩，只发到最后一个空格、换行或汉字，末尾已稳定的字母扣住不发（已发的字数还会往回退），不够尽早。
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
        printable = _printable(new)
        out = printable[self.sent_pending:]
        self.sent_pending = len(printable)
        return out

    def flush(self) -> str:
        out = self._new_text()[self.sent_pending:]
        self.surr_offset, self.read_offset = self.read_offset, len(self.ids)
        self.sent_pending = 0
        return out


def _printable(text):
    cjk = lambda ch: "一" <= ch <= "鿿"
    if text.endswith("\n") or (text and cjk(text[-1])):
        return text
    if len(text) > 1 and cjk(text[-2]):
        return text[:-1]
    return text[:text.rfind(" ") + 1]
