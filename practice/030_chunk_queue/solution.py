"""练习 030 · 按 token 预算切分 prefill 队列 —— 参考答案。"""

from __future__ import annotations


def plan_prefill(
    input_lens: list[int], token_budget: int, cached_lens: list[int] | None = None
) -> list[list[tuple[int, int, int]]]:
    if cached_lens is None:
        cached_lens = [0] * len(input_lens)
    if token_budget < 1:
        raise ValueError(f"token_budget 至少是 1：{token_budget}")
    if len(cached_lens) != len(input_lens):
        raise ValueError(f"input_lens 有 {len(input_lens)} 个，cached_lens 有 {len(cached_lens)} 个")
    for i, (n, c) in enumerate(zip(input_lens, cached_lens)):
        if n < 1 or not 0 <= c < n:
            raise ValueError(f"第 {i} 个请求：要求 input_len ≥ 1 且 0 ≤ cached_len < input_len，收到 {n}、{c}")

    next_pos = list(cached_lens)  # 每个请求下一个要算的位置
    steps: list[list[tuple[int, int, int]]] = []
    head = 0  # 队首的请求；被切开的请求不出队，所以它自然“回到队首”
    while head < len(input_lens):
        budget, batch = token_budget, []
        while budget > 0 and head < len(input_lens):
            start = next_pos[head]
            end = min(input_lens[head], start + budget)
            batch.append((head, start, end))
            budget -= end - start
            next_pos[head] = end
            if end < input_lens[head]:  # 被切开：这一步到此为止
                break
            head += 1
        steps.append(batch)
    return steps
