# 作弊：frombuffer 之后不复制（和 buffer 共用内存）
# 为什么必须判错：题目要求 tensor_from_wire 返回的张量拥有自己的内存；它 frombuffer 之后不复制，和传进来的 bytearray 共用内存，之后改 buffer，张量跟着变。
# 判词里要有：应该不跟着变

"""练习 038 的参考答案：全程只用 torch，不经过 numpy。"""

from __future__ import annotations

import torch

DTYPES = {
    "bool": torch.bool, "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16,
    "int32": torch.int32, "int64": torch.int64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64,
}
_NAMES = {dtype: name for name, dtype in DTYPES.items()}


def tensor_to_wire(t: torch.Tensor) -> dict:
    if t.dim() != 1:
        raise ValueError(f"只支持一维张量，收到形状 {tuple(t.shape)}")
    if t.dtype not in _NAMES:
        raise ValueError(f"不支持的类型 {t.dtype}")
    # 复制成步长为 1 的张量，再看成字节（比特不变）；只有一个元素的切片 contiguous() 不改步长
    as_bytes = t.clone(memory_format=torch.contiguous_format).view(torch.uint8)
    return {"dtype": _NAMES[t.dtype], "buffer": bytes(as_bytes.tolist())}


def tensor_from_wire(d: dict) -> torch.Tensor:
    name, buffer = d["dtype"], d["buffer"]
    if name not in DTYPES:
        raise ValueError(f"不认识的类型名 {name!r}")
    dtype = DTYPES[name]
    size = torch.empty(0, dtype=dtype).element_size()
    if len(buffer) % size:
        raise ValueError(f"{len(buffer)} 字节不是 {name} 元素大小 {size} 的整数倍")
    if len(buffer) == 0:
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer(buffer, dtype=dtype)
