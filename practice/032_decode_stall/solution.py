"""练习 032 · 长输入插进来，decode 要等多久 —— 参考答案。"""

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
    if prompt_len < 1 or token_budget < 1:
        raise ValueError(f"prompt_len 和 token_budget 至少是 1：{prompt_len}、{token_budget}")
    if any(n < 1 for n in decode_left):
        raise ValueError(f"每个 decode 请求至少还要 1 步：{decode_left}")

    left = list(decode_left)
    last = [0.0] * len(left)  # 每个请求上一个 token 的时刻
    now, pos, max_gap, ttft = 0.0, 0, 0.0, 0.0
    last_was_chunk = False  # 上一步是没算完整段提示的一块
    steps: list[tuple] = []
    while pos < prompt_len or any(left):
        running = [i for i, n in enumerate(left) if n > 0]
        if decode_between_chunks and last_was_chunk and running:
            prefill = False
        else:
            prefill = pos < prompt_len
        if prefill:
            end = min(pos + token_budget, prompt_len)
            now += prefill_ms(pos, end)
            steps.append(("prefill", pos, end))
            pos = end
            last_was_chunk = pos < prompt_len
            if not last_was_chunk:
                ttft = now
        else:
            now += decode_ms(len(running))
            steps.append(("decode", len(running)))
            for i in running:
                max_gap = max(max_gap, now - last[i])
                last[i] = now
                left[i] -= 1
            last_was_chunk = False
    return steps, max_gap, ttft
