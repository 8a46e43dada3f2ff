"""练习 038 · 一维张量变成字节：bfloat16 也要一个比特不差（第 12 章 消息、序列化与 ZMQ）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch

DTYPES = {
    "bool": torch.bool, "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16,
    "int32": torch.int32, "int64": torch.int64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64,
}


def tensor_to_wire(t: torch.Tensor) -> dict:
    """CPU 上的一维张量 → {"dtype": 名字, "buffer": 各元素的原始字节（按下标顺序）}。"""
    raise NotImplementedError


def tensor_from_wire(d: dict) -> torch.Tensor:
    """tensor_to_wire 的逆操作：比特完全相同，返回的张量拥有自己的内存。"""
    raise NotImplementedError
