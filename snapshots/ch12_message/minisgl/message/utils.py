"""把消息对象变成"只含基本类型的字典"，再从字典变回对象。

msgpack 只认识 None、bool、int、float、str、bytes、list、dict 这几种值。消息是 dataclass，
里面还可能有 SamplingParams 和一维张量，所以发送前先"拍平"：

- dataclass → ``{"__type__": 类名, 字段名: 字段值, ...}``（字段值递归处理）；
- 一维 CPU 张量 → ``{"__type__": "Tensor", "buffer": 原始字节, "dtype": "int32"}``；
- list / tuple → list，dict → dict（值递归处理），基本类型原样保留。

解码时看 ``__type__`` 查表找回类。表由调用方给出（每个消息家族只给自己的类），
所以收到的字节不能让解码器构造表外的任何类型。
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

TYPE_KEY = "__type__"
TENSOR_TAG = "Tensor"

# 允许出现在消息里的张量类型：名字 → (torch 类型, 搬运字节时用的 numpy 类型)。
# numpy 没有 bfloat16，所以 bfloat16 借用同样 16 位宽的 int16 来搬运字节：
# 编码时 view 成 int16（不改变任何一个比特），解码后再 view 回 bfloat16。
_TENSOR_DTYPES: dict[str, tuple[torch.dtype, Any]] = {
    "bool": (torch.bool, np.bool_),
    "uint8": (torch.uint8, np.uint8),
    "int8": (torch.int8, np.int8),
    "int16": (torch.int16, np.int16),
    "int32": (torch.int32, np.int32),
    "int64": (torch.int64, np.int64),
    "float16": (torch.float16, np.float16),
    "bfloat16": (torch.bfloat16, np.int16),
    "float32": (torch.float32, np.float32),
    "float64": (torch.float64, np.float64),
}
_DTYPE_NAMES = {torch_dtype: name for name, (torch_dtype, _) in _TENSOR_DTYPES.items()}
_PLAIN = (type(None), bool, int, float, str, bytes)


# ---------------------------------------------------------------- 编码


def _tensor_to_dict(tensor: torch.Tensor) -> dict:
    if tensor.dim() != 1:
        raise ValueError(f"消息里只能放一维张量，收到形状 {tuple(tensor.shape)}")
    if tensor.device.type != "cpu":
        raise ValueError(f"消息里的张量必须在 CPU 上（先 .cpu()），收到 {tensor.device}")
    if tensor.dtype not in _DTYPE_NAMES:
        raise ValueError(f"不支持的张量类型 {tensor.dtype}，支持：{', '.join(_TENSOR_DTYPES)}")
    name = _DTYPE_NAMES[tensor.dtype]
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.view(torch.int16)  # 同样 16 位，比特不变，只是 numpy 认得 int16
    return {TYPE_KEY: TENSOR_TAG, "buffer": tensor.numpy().tobytes(), "dtype": name}


def _serialize_value(value: Any) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (list, tuple)):  # msgpack 不区分两者，统一成 list
        return [_serialize_value(v) for v in value]
    if isinstance(value, dict):
        if TYPE_KEY in value:  # 否则解码时会被当成一个对象
            raise ValueError(f"普通字典里不能有 {TYPE_KEY!r} 这个键，它留给类型标签")
        return {k: _serialize_value(v) for k, v in value.items()}
    return serialize_type(value)


def serialize_type(obj: Any) -> dict:
    """把一个 dataclass 对象（或一维 CPU 张量）变成只含基本类型的字典，嵌套的也一起处理。"""
    if isinstance(obj, torch.Tensor):
        return _tensor_to_dict(obj)
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"不知道怎样序列化 {type(obj).__name__} 类型的值：只支持 dataclass 与一维张量")
    out: dict = {TYPE_KEY: type(obj).__name__}
    for f in dataclasses.fields(obj):
        assert f.init, f"{type(obj).__name__}.{f.name} 不是构造参数，解码时无法还原"
        out[f.name] = _serialize_value(getattr(obj, f.name))
    return out


# ---------------------------------------------------------------- 解码


def _tensor_from_dict(data: dict) -> torch.Tensor:
    name, buffer = data.get("dtype"), data.get("buffer")
    if name not in _TENSOR_DTYPES:
        raise ValueError(f"张量的 dtype {name!r} 不认识，支持：{', '.join(_TENSOR_DTYPES)}")
    if not isinstance(buffer, bytes):
        raise ValueError(f"张量的 buffer 应该是 bytes，收到 {type(buffer).__name__}")
    torch_dtype, np_dtype = _TENSOR_DTYPES[name]
    itemsize = np.dtype(np_dtype).itemsize
    if len(buffer) % itemsize != 0:
        raise ValueError(f"张量的字节数 {len(buffer)} 不是 {name} 单个元素 {itemsize} 字节的整数倍")
    # frombuffer 得到的数组只读且借用 msgpack 的内存，copy 一份让张量拥有自己的可写内存
    array = np.frombuffer(buffer, dtype=np_dtype).copy()
    return torch.from_numpy(array).view(torch_dtype)


def _deserialize_value(cls_map: dict[str, type], value: Any) -> Any:
    if isinstance(value, dict):
        if TYPE_KEY in value:
            return deserialize_type(cls_map, value)
        return {k: _deserialize_value(cls_map, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deserialize_value(cls_map, v) for v in value]
    if isinstance(value, _PLAIN):
        return value
    raise ValueError(f"消息里出现了无法解码的值类型 {type(value).__name__}")


def deserialize_type(cls_map: dict[str, type], data: Any) -> Any:
    """serialize_type 的逆操作。cls_map：类名 → 类，只有表里的类才会被构造。"""
    if not isinstance(data, dict) or not isinstance(data.get(TYPE_KEY), str):
        shown = type(data).__name__
        raise ValueError(f"消息应该是带 {TYPE_KEY!r} 类型标签的字典，收到 {shown}")
    name = data[TYPE_KEY]
    if name == TENSOR_TAG:
        return _tensor_from_dict(data)
    if name not in cls_map:
        known = "、".join(sorted(cls_map)) or "（空）"
        raise ValueError(f"未知的消息类型 {name!r}：这个解码器只认识 {known}")
    kwargs = {k: _deserialize_value(cls_map, v) for k, v in data.items() if k != TYPE_KEY}
    cls = cls_map[name]
    if dataclasses.is_dataclass(cls):
        _check_fields(cls, kwargs)
    try:
        return cls(**kwargs)
    except TypeError as e:  # 表里的类不是 dataclass 时，字段由构造函数自己检查
        raise ValueError(f"{name} 的字段与收到的不符（收到 {sorted(kwargs)}）：{e}") from e


def _check_fields(cls: type, kwargs: dict) -> None:
    fields = dataclasses.fields(cls)
    extra = sorted(set(kwargs) - {f.name for f in fields})
    missing = [f.name for f in fields if f.name not in kwargs
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if extra or missing:
        raise ValueError(f"{cls.__name__} 的字段与收到的不符：多了 {extra}，缺了 {missing}")


def check_family(msg: Any, base: type, batch: type, family: str) -> None:
    """解码之后再查一遍：最外层是这一族的消息，批消息里的每一条也是。

    白名单里还有 SamplingParams 之类的非消息类，它们可以出现在字段里，却不能被当成一条消息。
    """
    if not isinstance(msg, base):
        raise ValueError(f"{family}消息的最外层必须是一条消息，收到 {type(msg).__name__}")
    if isinstance(msg, batch):
        if not isinstance(msg.data, list):
            raise ValueError(f"{batch.__name__}.data 应该是列表，收到 {type(msg.data).__name__}")
        for item in msg.data:
            if not isinstance(item, base):
                raise ValueError(f"{batch.__name__} 里混进了 {type(item).__name__}：批里的每一条都必须是一条消息")
