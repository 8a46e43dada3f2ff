"""练习 002 · 贪心生成循环（第 0 章 架构全景与最小引擎）

这是一道“找 bug”：下面的循环能生成出一串 token，但它没有用上 KV 缓存（每步都把整段序列从头喂一遍），
遇到 EOS 的处理也不对。改好以后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

from collections.abc import Callable

# step(tokens, start) -> logits：tokens 是这一步新送进去的 token，start 是它们前面已在缓存里的 token 数；
# 返回 tokens 里最后一个位置的 logits（下标就是 token id）。
Step = Callable[[list[int], int], list[float]]


def greedy_generate(
    prompt: list[int], step: Step, max_new_tokens: int, eos_id: int | None = None
) -> list[int]:
    """贪心生成：prefill 一次送完整段提示，之后每步只送上一步选出的 1 个 token。

    返回新生成的 token（不含提示）。生成出 eos_id 就停（eos_id 包含在结果里），
    否则正好生成 max_new_tokens 个。argmax 有并列时取 id 最小的。
    """
    new_ids: list[int] = []
    while len(new_ids) < max_new_tokens:
        logits = step(prompt + new_ids, 0)
        next_id = logits.index(max(logits))
        if next_id == eos_id:
            break
        new_ids.append(next_id)
    return new_ids
