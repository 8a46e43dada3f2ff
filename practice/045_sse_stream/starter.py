"""练习 045 · SSE：把一段段回复写成事件，再从字节流里读回来（第 15 章 API Server、启动器与 shell）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import json

DONE = "[DONE]"


def encode_event(payload: dict | str) -> bytes:
    """一个 SSE 事件：`data: <JSON 或 [DONE]>` 加一个空行，UTF-8 编码。"""
    raise NotImplementedError


class SSEParser:
    """一块一块地收字节，交出已经完整的事件的数据（JSON 解析出的 dict、"[DONE]"，或纯文本字符串）。"""

    def __init__(self) -> None:
        raise NotImplementedError

    def feed(self, chunk: bytes) -> list:
        """收下一块，按顺序返回这一块让它完整的所有事件。"""
        raise NotImplementedError
