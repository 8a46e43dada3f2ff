"""练习 030 · 按 token 预算切分 prefill 队列（第 10 章 分块 prefill）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def plan_prefill(
    input_lens: list[int], token_budget: int, cached_lens: list[int] | None = None
) -> list[list[tuple[int, int, int]]]:
    """按先来先服务和每步 token_budget 个 token 的预算，排出每一步 prefill 算哪些位置。

    返回每一步的批，每项 (请求下标, start, end)：这一步算这个请求的 [start, end)。
    收到某个请求时预算不够，就只收一块，它下一步回到队首接着算。参数不对时抛 ValueError。
    """
    raise NotImplementedError
