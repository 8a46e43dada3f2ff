"""练习 020 · 批量生成的主循环记账 —— 参考答案。"""

from __future__ import annotations

from collections.abc import Callable

Step = Callable[[list[tuple[int, list[int], int]]], list[int]]


def generate_batch(
    prompts: list[list[int]],
    max_tokens: list[int],
    step: Step,
    eos_id: int | None = None,
    ignore_eos: list[bool] | None = None,
) -> tuple[list[list[int]], list[int]]:
    n = len(prompts)
    if ignore_eos is None:
        ignore_eos = [False] * n
    if len(max_tokens) != n or len(ignore_eos) != n:
        raise ValueError(
            f"prompts 有 {n} 个，max_tokens 有 {len(max_tokens)} 个，ignore_eos 有 {len(ignore_eos)} 个"
        )
    for i, (prompt, limit) in enumerate(zip(prompts, max_tokens)):
        if not prompt:
            raise ValueError(f"第 {i} 个提示词是空的")
        if limit < 1:
            raise ValueError(f"第 {i} 个请求的 max_tokens 至少是 1：{limit}")

    outputs: list[list[int]] = [[] for _ in range(n)]
    batch_sizes: list[int] = []

    def finished(i: int) -> bool:
        out = outputs[i]
        if len(out) == max_tokens[i]:
            return True
        return eos_id is not None and not ignore_eos[i] and out[-1] == eos_id

    running = list(range(n))
    batch = [(i, list(prompts[i]), 0) for i in running]  # 第一步：所有请求一起 prefill
    while running:
        next_tokens = step(batch)
        batch_sizes.append(len(batch))
        for (i, _, _), token in zip(batch, next_tokens):
            outputs[i].append(token)
        running = [i for i in running if not finished(i)]  # 保持 req_id 从小到大
        # 下一步只送每个还在跑的请求上一步选出的 token；它前面的都在缓存里了
        batch = [
            (i, [outputs[i][-1]], len(prompts[i]) + len(outputs[i]) - 1)
            for i in running
        ]
    return outputs, batch_sizes
