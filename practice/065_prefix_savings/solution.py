"""练习 065 · 共享前缀省下多少 prefill：按到达顺序数出每个请求要算几个 token（第 21 章 基准测试与消融）

参考答案。
"""

from __future__ import annotations


def _is_token(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def prefill_costs(batches: list[list[list[int]]], page_size: int) -> list[list[int]]:
    """按顺序的几批 prefill → 每个请求要算几个提示 token（形状和 batches 一样）。

    提示去掉最后一个 token 去匹配此前各批插进树的序列，匹配长度向下取整到整页；一批算完才插进树
    （也只留整页）。坏参数抛 ValueError。"""
    if not isinstance(page_size, int) or isinstance(page_size, bool) or page_size < 1:
        raise ValueError(f"page_size 要是 ≥ 1 的整数，收到 {page_size!r}")
    if not isinstance(batches, list):
        raise ValueError("batches 要是列表")
    for b, batch in enumerate(batches):
        if not isinstance(batch, list) or not batch:
            raise ValueError(f"第 {b} 批要是非空的列表")
        for prompt in batch:
            if not isinstance(prompt, list) or not prompt or not all(_is_token(t) for t in prompt):
                raise ValueError(f"第 {b} 批里的提示要是非空的、由 ≥ 0 的整数组成的列表")
    cached: list[list[int]] = []  # 已经插进树的序列（整页）
    costs = []
    for batch in batches:
        row = []
        for prompt in batch:
            key = prompt[:-1]  # 最后一个 token 总要算
            hit = max((_common(key, seq) for seq in cached), default=0)
            hit -= hit % page_size
            row.append(len(prompt) - hit)
        costs.append(row)
        for prompt in batch:  # 这一批算完，才进树
            cached.append(prompt[:len(prompt) - len(prompt) % page_size])
    return costs
