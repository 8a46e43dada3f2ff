"""练习 057 · int4 分组量化：一组 32 个数的 d、m、q，和一行 4 位整数的打包（第 19 章 自定义算子）

参考答案。
"""

from __future__ import annotations

GROUP = 32  # 一组几个数


def _is_nibble(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 15


def quantize_group(values: list[float]) -> tuple[float, float, list[int]]:
    """32 个数 → (d, m, q)：m 是最小值，d = (最大值 - m) / 15，q = round((w - m) / d) ∈ [0, 15]。
    全相等时 d = 0、q 全是 0。坏参数抛 ValueError。"""
    if len(values) != GROUP:
        raise ValueError(f"一组要 {GROUP} 个数，收到 {len(values)} 个")
    m = float(min(values))
    d = (float(max(values)) - m) / 15
    scale = max(d, 1e-30)  # 全相等的组：d = 0，每个 w - m 也是 0
    q = [min(15, max(0, round((w - m) / scale))) for w in values]
    return d, m, q


def dequantize_group(d: float, m: float, q: list[int]) -> list[float]:
    """32 个 d·q + m。坏参数抛 ValueError。"""
    if len(q) != GROUP or not all(_is_nibble(x) for x in q):
        raise ValueError(f"q 要是 {GROUP} 个 [0, 15] 里的整数，收到 {q!r}")
    return [d * x + m for x in q]


def pack_row(q: list[int]) -> bytes:
    """一行 K 个 4 位整数（K 是 64 的倍数）→ K/2 个字节：第 j 个字节的低 4 位是 q[j]，高 4 位是 q[j + K/2]。
    坏参数抛 ValueError。"""
    if not q or len(q) % (2 * GROUP) != 0:
        raise ValueError(f"一行的长度要是 {2 * GROUP} 的正整数倍，收到 {len(q)}")
    if not all(_is_nibble(x) for x in q):
        raise ValueError("q 的每一项要是 [0, 15] 里的整数")
    half = len(q) // 2
    return bytes(q[j] | (q[j + half] << 4) for j in range(half))


def unpack_row(data: bytes) -> list[int]:
    """pack_row 的逆：K/2 个字节 → K 个 int。坏参数抛 ValueError。"""
    if not data or len(data) % GROUP != 0:
        raise ValueError(f"字节数要是 {GROUP} 的正整数倍，收到 {len(data)}")
    return [b & 0xF for b in data] + [b >> 4 for b in data]
