"""练习 025 · 按最坏情况接纳 —— 参考答案。"""

from __future__ import annotations


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _validate(pending, running, page_size, counts) -> None:
    if page_size < 1:
        raise ValueError(f"page_size 必须 ≥ 1，收到 {page_size}")
    for name, value in counts.items():
        if value < 0:
            raise ValueError(f"{name} 不能是负数，收到 {value}")
    for i, (input_len, max_tokens, cached_len, lock_pages) in enumerate(pending):
        if input_len < 1 or max_tokens < 1:
            raise ValueError(f"第 {i} 个排队请求：input_len 和 max_tokens 都要 ≥ 1")
        if cached_len < 0 or cached_len % page_size or cached_len >= input_len:
            raise ValueError(f"第 {i} 个排队请求：cached_len={cached_len} 要是整页且小于提示长度")
        if not 0 <= lock_pages <= cached_len // page_size:
            raise ValueError(f"第 {i} 个排队请求：lock_pages={lock_pages} 比命中的页还多")
    for i, (cached_len, max_device_len) in enumerate(running):
        if not 0 <= cached_len < max_device_len:
            raise ValueError(f"第 {i} 个在跑的请求：要求 0 ≤ cached_len < max_device_len")


def admit(pending, running, *, page_size, free_pages, evictable_pages, free_rows, token_budget):
    _validate(pending, running, page_size, {
        "free_pages": free_pages, "evictable_pages": evictable_pages,
        "free_rows": free_rows, "token_budget": token_budget})
    # 在跑的请求写到 max_device_len - 1 为止；[0, cached_len) 的页已经分到了
    reserved = sum(_ceil_div(end - 1, page_size) - _ceil_div(start, page_size)
                   for start, end in running)
    admitted = 0
    for input_len, max_tokens, cached_len, lock_pages in pending:
        if admitted == free_rows:
            break
        extend = input_len - cached_len
        if admitted > 0 and extend > token_budget:
            break
        worst = _ceil_div(input_len + max_tokens - 1, page_size) - cached_len // page_size
        evictable_pages -= lock_pages  # 先锁再数
        if worst + reserved > free_pages + evictable_pages:
            evictable_pages += lock_pages
            break
        token_budget -= extend
        reserved += worst
        admitted += 1
    return admitted
