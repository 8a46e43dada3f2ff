# 作弊：tuple 原样保留
# 为什么必须判错：题目要求 list 和 tuple 都变成 list（msgpack 不区分两者）；它保留 tuple，对象里有 tuple 字段时 to_wire 的结果和参考不一样，tuple 没有变成 list。
# 判词里要有：tuple 没有变成 list

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
        return type(obj)(to_wire(v) for v in obj)
    if isinstance(obj, dict):
        if TYPE_KEY in obj:
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
