"""练习 036 · 类型标签：把 dataclass 拍平，再只按白名单还原（第 12 章 消息、序列化与 ZMQ）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import dataclasses
from typing import Any

TYPE_KEY = "__type__"


def to_wire(obj: Any) -> Any:
    """把 obj 变成只含 None/bool/int/float/str/bytes/list/dict 的结构；dataclass 写成带标签的字典。

    tuple → list；普通字典里有 "__type__" 键抛 ValueError；不支持的值抛 TypeError。
    """
    raise NotImplementedError


def from_wire(classes: dict[str, type], data: Any) -> Any:
    """to_wire 的逆操作。只构造 classes 里的类：未知标签、字段对不上都抛 ValueError。"""
    raise NotImplementedError
