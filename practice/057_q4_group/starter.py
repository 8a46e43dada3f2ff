"""练习 057 · int4 分组量化：一组 32 个数的 d、m、q，和一行 4 位整数的打包（第 19 章 自定义算子）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

GROUP = 32  # 一组几个数


def quantize_group(values: list[float]) -> tuple[float, float, list[int]]:
    """32 个数 → (d, m, q)：m 是最小值，d = (最大值 - m) / 15，q = round((w - m) / d) ∈ [0, 15]。
    全相等时 d = 0、q 全是 0。坏参数抛 ValueError。"""
    raise NotImplementedError


def dequantize_group(d: float, m: float, q: list[int]) -> list[float]:
    """32 个 d·q + m。坏参数抛 ValueError。"""
    raise NotImplementedError


def pack_row(q: list[int]) -> bytes:
    """一行 K 个 4 位整数（K 是 64 的倍数）→ K/2 个字节：第 j 个字节的低 4 位是 q[j]，高 4 位是 q[j + K/2]。
    坏参数抛 ValueError。"""
    raise NotImplementedError


def unpack_row(data: bytes) -> list[int]:
    """pack_row 的逆：K/2 个字节 → K 个 int。坏参数抛 ValueError。"""
    raise NotImplementedError
