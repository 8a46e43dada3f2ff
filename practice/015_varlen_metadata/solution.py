"""练习 015 · 变长批次的注意力元数据 —— 参考答案。"""

from __future__ import annotations

from dataclasses import dataclass

Span = tuple[int, int]  # (cached_len, device_len)


@dataclass
class VarlenMetadata:
    """一个批的注意力元数据。"""

    q_lens: list[int]
    k_lens: list[int]
    cu_seqlens_q: list[int]
    cu_seqlens_k: list[int]
    max_seqlen_q: int
    max_seqlen_k: int
    positions: list[int]
    req_of_token: list[int]
    last_indices: list[int]


def _check_span(cached_len: int, device_len: int) -> None:
    if not (0 <= cached_len < device_len):
        raise ValueError(
            f"要求 0 <= cached_len < device_len，现在是 ({cached_len}, {device_len})"
        )


def _prefix_sums(lengths: list[int]) -> list[int]:
    cu = [0]
    for length in lengths:
        cu.append(cu[-1] + length)
    return cu


def build_metadata(spans: list[Span]) -> VarlenMetadata:
    q_lens: list[int] = []
    k_lens: list[int] = []
    positions: list[int] = []
    req_of_token: list[int] = []
    for req, (cached, device) in enumerate(spans):
        _check_span(cached, device)
        q_lens.append(device - cached)  # 这一步送进去的 token
        k_lens.append(device)  # 缓存里的前缀 + 新 token
        positions.extend(range(cached, device))  # 位置从 cached_len 开始，不是 0
        req_of_token.extend([req] * (device - cached))
    cu_q = _prefix_sums(q_lens)
    return VarlenMetadata(
        q_lens=q_lens,
        k_lens=k_lens,
        cu_seqlens_q=cu_q,
        cu_seqlens_k=_prefix_sums(k_lens),
        max_seqlen_q=max(q_lens, default=0),
        max_seqlen_k=max(k_lens, default=0),
        positions=positions,
        req_of_token=req_of_token,
        last_indices=[end - 1 for end in cu_q[1:]],  # 第 i 段是 [cu[i], cu[i+1])
    )


def causal_mask(cached_len: int, device_len: int) -> list[list[int]]:
    _check_span(cached_len, device_len)
    # 第 i 个 query 是第 cached_len + i 个 token：右下角对齐
    return [
        [1 if j <= cached_len + i else 0 for j in range(device_len)]
        for i in range(device_len - cached_len)
    ]
