"""练习 046 · 请求的参数：坏了就 400，并且指出是哪一个（第 15 章 API Server、启动器与 shell）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import math

ROLES = ("system", "user", "assistant")
FIELDS = ("messages", "model", "max_tokens", "temperature", "top_p", "top_k", "stop", "stream")


class BadRequest(Exception):
    """请求有问题：回 400。param 是出错的字段名（请求体本身不是 JSON 对象时是 None）。"""

    def __init__(self, message: str, param: str | None) -> None:
        super().__init__(message)
        self.message, self.param = message, param


def validate_chat_request(body: object) -> dict:
    """检查 /v1/chat/completions 的请求体；通过时返回填好默认值的 8 个参数，否则抛 BadRequest。"""
    raise NotImplementedError
