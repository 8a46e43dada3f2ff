# 作弊：data 行去掉所有空白、多行直接拼起来
# 为什么必须判错：题目要求 data: 后面只去掉紧跟的一个空格、多行 data 按 \n 连起来；它去掉所有首尾空白、多行直接拼接，以空格开头的纯文本数据和多行 data 的事件交出的内容不对。
# 判词里要有：不对

"""练习 045 的参考答案。"""

from __future__ import annotations

import json

DONE = "[DONE]"


def encode_event(payload: dict | str) -> bytes:
    if payload == DONE:
        text = DONE
    elif isinstance(payload, dict):
        text = json.dumps(payload, ensure_ascii=False)
    else:
        raise TypeError(f"payload 应当是 dict 或 {DONE!r}，收到 {payload!r}")
    return f"data: {text}\n\n".encode("utf-8")


class SSEParser:
    def __init__(self) -> None:
        self._buffer = bytearray()  # 还没遇到换行的字节
        self._data: list[str] = []  # 当前事件已经收到的 data 行

    def feed(self, chunk: bytes) -> list:
        self._buffer += chunk
        events = []
        while (end := self._buffer.find(b"\n")) != -1:
            raw = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            line = raw.decode("utf-8").removesuffix("\r")  # 整行才解码：不会切开一个字符
            if line == "":
                if self._data:
                    text = "".join(self._data)
                    events.append(DONE if text == DONE else _json_or_text(text))
                self._data = []
            elif line.startswith(":"):
                continue  # 注释
            else:
                field, _, value = line.partition(":")
                if field == "data":
                    self._data.append(value.strip())
        return events


def _json_or_text(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:  # 纯文本事件：原样交出
        return text
