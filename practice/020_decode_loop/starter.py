"""练习 020 · 批量生成的主循环记账（第 6 章 Engine 与采样器）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

from collections.abc import Callable

# step(batch) -> 下一个 token 的列表。batch 的每一项是 (req_id, tokens, start)：
# tokens 是这一步送进去的新 token，start 是这个请求已经在 KV 缓存里的 token 数。
Step = Callable[[list[tuple[int, list[int], int]]], list[int]]


def generate_batch(
    prompts: list[list[int]],
    max_tokens: list[int],
    step: Step,
    eos_id: int | None = None,
    ignore_eos: list[bool] | None = None,
) -> tuple[list[list[int]], list[int]]:
    """批量生成：一次 prefill 全部请求，之后每步只 decode 还没结束的请求。

    返回 (outputs, batch_sizes)：outputs[i] 是第 i 个请求新生成的 token（eos_id 包含在内），
    batch_sizes 是每次调用 step 时批的大小。请求生成了 max_tokens[i] 个、或生成出 eos_id
    （ignore_eos[i] 为 True 时不看 EOS）就结束。参数不对时抛 ValueError。
    """
    raise NotImplementedError
