# 作弊：json.dumps 用默认的 ensure_ascii（中文变成 \uXXXX）
# 为什么必须判错：题目要求 encode_event 用 json.dumps(payload, ensure_ascii=False)；它用默认的 ensure_ascii，中文和 emoji 被写成 \uXXXX，写出的字节和要求不一样。
# 判词里要有：ensure_ascii

"""练习 045 的参考答案。"""

from __future__ import annotations

import json

DONE = "[DONE]"


def encode_event(payload: dict | str) -> bytes:
    if payload == DONE:
        text = DONE
    elif isinstance(payload, dict):
        text = json.dumps(payload)
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
                    text = "\n".join(self._data)
                    events.append(DONE if text == DONE else _json_or_text(text))
                self._data = []
            elif line.startswith(":"):
                continue  # 注释
            else:
                field, _, value = line.partition(":")
                if field == "data":
                    self._data.append(value[1:] if value.startswith(" ") else value)
        return events


def _json_or_text(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:  # 纯文本事件：原样交出
        return text
