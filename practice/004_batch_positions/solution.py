"""练习 004 · 批的 positions 与 cu_seqlens —— 参考答案。"""

from __future__ import annotations

Span = tuple[int, int]  # (cached_len, device_len)


def extend_lens(spans: list[Span]) -> list[int]:
    lens = []
    for cached_len, device_len in spans:
        # 修复 4：漏掉的检查。cached_len == device_len 的请求没有 token 可算，拿不到 logits。
        if not (0 <= cached_len < device_len):
            raise ValueError(
                f"请求的长度不合法：需要 0 <= cached_len < device_len，"
                f"现在是 ({cached_len}, {device_len})"
            )
        lens.append(device_len - cached_len)
    return lens


def batch_positions(spans: list[Span]) -> list[int]:
    extend_lens(spans)  # 只为检查参数
    positions: list[int] = []
    for cached_len, device_len in spans:
        positions.extend(range(cached_len, device_len))  # 修复 1：从 cached_len 开始，不是 0
    return positions


def cu_seqlens(lengths: list[int]) -> list[int]:
    out = [0]  # 修复 2：开头补 0，第 i 段是 [out[i], out[i+1])
    for n in lengths:
        out.append(out[-1] + n)
    return out


def last_token_indices(spans: list[Span]) -> list[int]:
    ends = cu_seqlens(extend_lens(spans))[1:]
    return [end - 1 for end in ends]  # 修复 3：一段 [start, end) 的最后一个元素是 end - 1
