"""练习 002 · 贪心生成循环 —— 参考答案。"""

from __future__ import annotations

from collections.abc import Callable

Step = Callable[[list[int], int], list[float]]


def argmax(logits: list[float]) -> int:
    """第一个最大值的下标：并列时取 id 最小的。"""
    return max(range(len(logits)), key=logits.__getitem__)


def greedy_generate(
    prompt: list[int], step: Step, max_new_tokens: int, eos_id: int | None = None
) -> list[int]:
    # 修复 1：prefill 只送一次整段提示；之后每步只送上一步选出的 1 个 token，
    # start 是它在序列里的位置（= 当前长度 - 1），前面的 token 都已经在缓存里了。
    logits = step(list(prompt), 0)
    new_ids: list[int] = []
    while True:
        next_id = argmax(logits)
        new_ids.append(next_id)  # 修复 2：先收下（EOS 也要包含在结果里），再判断停不停
        if len(new_ids) == max_new_tokens or next_id == eos_id:
            return new_ids  # 最后一个 token 不再送进模型
        logits = step([next_id], len(prompt) + len(new_ids) - 1)
