"""练习 039 · 字节块的增量 UTF-8 解码（第 13 章 Tokenizer 与增量反分词）：参考答案。"""

from __future__ import annotations


def _char_length(lead: int) -> int:
    """UTF-8 第一个字节 → 这个字一共几个字节。"""
    if lead < 0x80:
        return 1
    if lead >> 5 == 0b110:
        return 2
    if lead >> 4 == 0b1110:
        return 3
    return 4  # 11110xxx


class Utf8Stream:
    """字节一块一块地到，交出已经完整的字符，半个字留到下一块。"""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, chunk: bytes) -> str:
        self.buffer += chunk
        # 最后一个字的第一个字节：从末尾往前跳过 10xxxxxx（最多 3 个）
        start = len(self.buffer)
        while start > 0 and len(self.buffer) - start < 4:
            start -= 1
            if self.buffer[start] >> 6 != 0b10:
                break
        if start < len(self.buffer) and start + _char_length(self.buffer[start]) > len(self.buffer):
            cut = start  # 最后一个字还没齐：留下它
        else:
            cut = len(self.buffer)
        text = bytes(self.buffer[:cut]).decode("utf-8")
        del self.buffer[:cut]
        return text

    @property
    def pending(self) -> int:
        return len(self.buffer)

    def finish(self) -> str:
        rest = "\ufffd" if self.buffer else ""
        self.buffer.clear()
        return rest
