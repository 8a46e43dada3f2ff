# 作弊：普通字典里的类型标签键不检查
# 为什么必须判错：题目要求普通字典里有 "__type__" 这个键时 to_wire 抛 ValueError（否则收件方会当成对象）；它不检查，带类型标签键的普通字典原样发出去。
# 判词里要有：类型标签键

"""练习 036 的参考答案。"""

from __future__ import annotations

import dataclasses
from typing import Any

TYPE_KEY = "__type__"
_PLAIN = (type(None), bool, int, float, str, bytes)


def to_wire(obj: Any) -> Any:
    if isinstance(obj, _PLAIN):
        return obj
    if isinstance(obj, (list, tuple)):
        return [to_wire(v) for v in obj]
    if isinstance(obj, dict):
        if False:
            raise ValueError(f"普通字典里不能有 {TYPE_KEY!r} 键")
        return {k: to_wire(v) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {TYPE_KEY: type(obj).__name__}
        for f in dataclasses.fields(obj):
            out[f.name] = to_wire(getattr(obj, f.name))
        return out
    raise TypeError(f"不能序列化 {type(obj).__name__}")


def from_wire(classes: dict[str, type], data: Any) -> Any:
    if isinstance(data, list):
        return [from_wire(classes, v) for v in data]
    if isinstance(data, dict):
        values = {k: from_wire(classes, v) for k, v in data.items() if k != TYPE_KEY}
        if TYPE_KEY not in data:
            return values
        name = data[TYPE_KEY]
        if not isinstance(name, str) or name not in classes:
            raise ValueError(f"未知的类型标签 {name!r}")
        try:
            return classes[name](**values)
        except TypeError as e:
            raise ValueError(f"{name} 的字段对不上：{e}") from e
    return data
