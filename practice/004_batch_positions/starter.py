"""练习 004 · 批的 positions 与 cu_seqlens（第 1 章 核心数据结构）

这是一道“找 bug”：下面的实现看起来挺像样，但有三个 bug，还漏了一处参数检查。
改好以后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

Span = tuple[int, int]  # (cached_len, device_len)


def extend_lens(spans: list[Span]) -> list[int]:
    """每个请求这一步要送进模型的 token 数：device_len - cached_len。

    任何一个请求不满足 0 <= cached_len < device_len，就抛 ValueError。
    """
    return [device_len - cached_len for cached_len, device_len in spans]


def batch_positions(spans: list[Span]) -> list[int]:
    """把批里每个请求送进去的 token 的位置首尾相接拼起来。

    第 i 个请求贡献 cached_len_i, cached_len_i + 1, ..., device_len_i - 1。
    """
    positions: list[int] = []
    for cached_len, device_len in spans:
        positions.extend(range(device_len - cached_len))
    return positions


def cu_seqlens(lengths: list[int]) -> list[int]:
    """长度的前缀和，开头补 0：[0, l0, l0+l1, ...]，比输入多一个元素。"""
    out: list[int] = []
    total = 0
    for n in lengths:
        total += n
        out.append(total)
    return out


def last_token_indices(spans: list[Span]) -> list[int]:
    """每个请求最后一个送进去的 token 在拼接序列里的下标。"""
    out: list[int] = []
    end = 0
    for n in extend_lens(spans):
        end += n
        out.append(end)
    return out
