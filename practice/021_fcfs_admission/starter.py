"""练习 021 · 先来先服务：按最坏情况接纳新请求（第 7 章 调度器骨架与离线接口）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def inflight_pages(running: list[tuple[int, int]], page_size: int) -> int:
    """在跑的请求最坏情况下还要几页。running 的每一项是 (cached_len, max_device_len)。

    最后采样出的 token 不进 KV 池；[0, cached_len) 的页已经分到了。page_size < 1 时抛 ValueError。
    """
    raise NotImplementedError


def admit(
    queue: list[tuple[int, int]],
    *,
    free_rows: int,
    free_pages: int,
    inflight: int,
    page_size: int,
    token_budget: int,
) -> list[int]:
    """从队首起按顺序接纳排队的请求（每一项是 (prompt_len, max_tokens)），返回接纳的下标。

    要有空行；队首之后的请求，提示长度不能超过剩下的 token 预算；最坏情况的页数不能超过
    free_pages - inflight 剩下的部分。有一条不满足就停下，后面的不许插队。
    page_size < 1 时抛 ValueError。
    """
    raise NotImplementedError
