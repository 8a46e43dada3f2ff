"""练习 032 · 长输入插进来，decode 要等多久（第 10 章 分块 prefill）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

from collections.abc import Callable


def simulate(
    decode_left: list[int],
    prompt_len: int,
    token_budget: int,
    decode_between_chunks: bool,
    prefill_ms: Callable[[int, int], float],
    decode_ms: Callable[[int], float],
) -> tuple[list[tuple], float, float]:
    """按第 10 章的调度顺序模拟：返回 (每一步, decode 请求的最长 token 间隔, 长提示的 TTFT)。

    每一步是 ("prefill", s, e) 或 ("decode", 请求数)。参数不对时抛 ValueError。
    """
    raise NotImplementedError
