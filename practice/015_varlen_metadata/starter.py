"""练习 015 · 变长批次的注意力元数据（第 5 章 注意力后端）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

from dataclasses import dataclass

Span = tuple[int, int]  # (cached_len, device_len)


@dataclass
class VarlenMetadata:
    """一个批的注意力元数据（已经写好，不用改）。"""

    q_lens: list[int]  # 每个请求这一步的 query 个数
    k_lens: list[int]  # 每个请求能看见的 key 个数
    cu_seqlens_q: list[int]  # q_lens 的前缀和，开头补 0
    cu_seqlens_k: list[int]  # k_lens 的前缀和，开头补 0
    max_seqlen_q: int  # q_lens 里最大的，空批为 0
    max_seqlen_k: int  # k_lens 里最大的，空批为 0
    positions: list[int]  # 拼接序列里每个 token 在它自己请求里的位置
    req_of_token: list[int]  # 拼接序列里每个 token 属于第几个请求
    last_indices: list[int]  # 每个请求最后一个 token 在拼接序列里的下标


def build_metadata(spans: list[Span]) -> VarlenMetadata:
    """由每个请求的 (cached_len, device_len) 算出整个批的元数据。

    任何一个请求不满足 0 <= cached_len < device_len 时抛 ValueError。
    """
    raise NotImplementedError


def causal_mask(cached_len: int, device_len: int) -> list[list[int]]:
    """一个请求的右下角对齐因果掩码：(device_len - cached_len) 行 × device_len 列的 0/1（int）。

    第 i 行第 j 列为 1 当且仅当 j <= cached_len + i。参数不满足 0 <= cached_len < device_len 时抛 ValueError。
    """
    raise NotImplementedError
