"""上游 mini-sglang 的增量反分词算法，照它的逻辑重写的一个小版本（只为演示它的 bug）。

对应上游 python/minisgl/tokenizer/detokenize.py 里的 ``DetokenizeManager.detokenize`` 和
``find_printable_text``（后者来自 transformers 的 TextStreamer）。这里一个请求一个对象、每次
``push`` 一步的 token；上游一次处理一批请求，单个请求的逻辑相同。
"""

from __future__ import annotations

from typing import Sequence


def is_cjk(ch: str) -> bool:
    """上游认作“中日韩统一表意文字”的几个 Unicode 区段（不含假名、谚文）。"""
    cp = ord(ch)
    ranges = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]
    return any(lo <= cp <= hi for lo, hi in ranges)


def printable_prefix(text: str) -> str:
    """文字以半个字结尾时，上游先发出的那部分：以换行结尾就全发；最后一个字是汉字也全发；
    倒数第二个字是汉字就发到它为止；否则只发到最后一个空格（不发半个英文单词）。"""
    if text.endswith("\n"):
        return text
    if text and is_cjk(text[-1]):
        return text
    if len(text) > 1 and is_cjk(text[-2]):
        return text[:-1]
    return text[:text.rfind(" ") + 1]


class UpstreamDecoder:
    """上游的算法：read/surr 两个 token 偏移 + 已发出的字符数 sent_offset。"""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.decoded = ""  # 已经确认的文字
        self.surr_offset = self.read_offset = self.sent_offset = 0

    def push(self, token_ids: Sequence[int]) -> str:
        self.ids.extend(token_ids)
        decode = self.tokenizer.decode
        window = decode(self.ids[self.surr_offset:])
        prefix = decode(self.ids[self.surr_offset:self.read_offset])
        new_text = window[len(prefix):]
        if new_text and not new_text.endswith("\ufffd"):
            self.decoded += new_text
            output = self.decoded
            self.surr_offset, self.read_offset = self.read_offset, len(self.ids)
        else:
            output = self.decoded + printable_prefix(new_text)
        piece = output[self.sent_offset:]
        self.sent_offset = len(output)  # 可能比上一次小：这就是 bug
        return piece
