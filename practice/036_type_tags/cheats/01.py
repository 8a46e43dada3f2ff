# 作弊：按模块的全局变量找类（白名单形同虚设）
# 为什么必须判错：题目要求标签不在白名单 classes 里就抛 ValueError，不要去模块的全局变量里找；它把 globals() 并进白名单，标签写成模块里的任何名字（类、函数）都会被拿来构造，不抛 ValueError。
# 判词里要有：应该抛出 ValueError

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
        classes = {**globals(), **classes}
        if not isinstance(name, str) or name not in classes:
            raise ValueError(f"未知的类型标签 {name!r}")
        try:
            return classes[name](**values)
        except TypeError as e:
            raise ValueError(f"{name} 的字段对不上：{e}") from e
    return data
