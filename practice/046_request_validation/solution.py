"""练习 046 的参考答案。"""

from __future__ import annotations

import math

ROLES = ("system", "user", "assistant")
FIELDS = ("messages", "model", "max_tokens", "temperature", "top_p", "top_k", "stop", "stream")


class BadRequest(Exception):
    """请求有问题：回 400。param 是出错的字段名（请求体本身不是 JSON 对象时是 None）。"""

    def __init__(self, message: str, param: str | None) -> None:
        super().__init__(message)
        self.message, self.param = message, param


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _require(ok: bool, param: str, message: str) -> None:
    if not ok:
        raise BadRequest(f"参数 {param}：{message}", param)


def validate_chat_request(body: object) -> dict:
    if not isinstance(body, dict):
        raise BadRequest("请求体要是一个 JSON 对象", None)
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise BadRequest(f"不认识的字段 {unknown[0]}", unknown[0])

    messages = body.get("messages")
    _require(isinstance(messages, list) and len(messages) > 0, "messages", "要一个非空列表")
    for m in messages:
        _require(isinstance(m, dict) and set(m) == {"role", "content"}, "messages",
                 "每一项要恰好有 role 和 content")
        _require(m["role"] in ROLES and isinstance(m["content"], str), "messages",
                 f"role 要是 {ROLES} 之一，content 要是字符串")

    model = body.get("model")
    _require(model is None or isinstance(model, str), "model", "要一个字符串")
    max_tokens = body.get("max_tokens")
    _require(max_tokens is None or (_is_int(max_tokens) and max_tokens >= 1), "max_tokens",
             "要 ≥ 1 的整数")
    temperature = body.get("temperature", 1.0)
    _require(_is_number(temperature) and 0 <= temperature <= 2, "temperature", "要在 [0, 2] 之间")
    top_p = body.get("top_p", 1.0)
    _require(_is_number(top_p) and 0 < top_p <= 1, "top_p", "要在 (0, 1] 之间")
    top_k = body.get("top_k", -1)
    _require(_is_int(top_k) and (top_k == -1 or top_k >= 1), "top_k", "要是 -1 或 ≥ 1 的整数")
    stop = body.get("stop")
    if stop is None:
        stops = []
    elif isinstance(stop, str):
        stops = [stop]
    else:
        _require(isinstance(stop, list) and 1 <= len(stop) <= 4, "stop", "要字符串或 1–4 个字符串的列表")
        stops = list(stop)
    _require(all(isinstance(s, str) and s for s in stops), "stop", "不能有空字符串或非字符串")
    stream = body.get("stream", False)
    _require(isinstance(stream, bool), "stream", "要 true 或 false")
    return {"messages": messages, "model": model, "max_tokens": max_tokens,
            "temperature": float(temperature), "top_p": float(top_p), "top_k": top_k,
            "stop": stops, "stream": stream}
