"""练习 021 · 先来先服务：按最坏情况接纳新请求 —— 参考答案。"""

from __future__ import annotations


def _div_ceil(a: int, b: int) -> int:
    return -(-a // b)


def _check_page_size(page_size: int) -> None:
    if page_size < 1:
        raise ValueError(f"page_size 至少是 1：{page_size}")


def inflight_pages(running: list[tuple[int, int]], page_size: int) -> int:
    _check_page_size(page_size)
    # 最后采样出的 token 不进 KV 池：最多占 max_device_len - 1 个槽位；[0, cached_len) 的页已经有了
    return sum(
        _div_ceil(max_device_len - 1, page_size) - _div_ceil(cached_len, page_size)
        for cached_len, max_device_len in running
    )


def admit(
    queue: list[tuple[int, int]],
    *,
    free_rows: int,
    free_pages: int,
    inflight: int,
    page_size: int,
    token_budget: int,
) -> list[int]:
    _check_page_size(page_size)
    pages_left = free_pages - inflight  # 在跑的请求将来要用的页先留出来
    admitted: list[int] = []
    for i, (prompt_len, max_tokens) in enumerate(queue):
        if free_rows == 0:
            break
        if admitted and prompt_len > token_budget:  # 队首第一个不看预算
            break
        worst = _div_ceil(prompt_len + max_tokens - 1, page_size)
        if worst > pages_left:
            break  # 先来先服务：放不下就停，后面的不许插队
        admitted.append(i)
        free_rows -= 1
        token_budget -= prompt_len
        pages_left -= worst
    return admitted
