# 作弊：先数后锁
# 为什么必须判错：题目要求先锁再数：evictable_pages 先减去 lock_pages，再比 worst + reserved 和 free_pages + evictable_pages；它用锁之前的逐出页数去比，锁住命中后恰好放不下的请求也被接纳了。
# 判词里要有：应该接纳
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def admit(pending, running, *, page_size, free_pages, evictable_pages, free_rows, token_budget):
    _validate(pending, running, page_size, {"free_pages": free_pages, "evictable_pages": evictable_pages,
              "free_rows": free_rows, "token_budget": token_budget})
    reserved = sum(_ceil_div(e - 1, page_size) - _ceil_div(s, page_size) for s, e in running)
    admitted = 0
    for input_len, max_tokens, cached_len, lock_pages in pending:
        if admitted == free_rows or (admitted > 0 and input_len - cached_len > token_budget):
            break
        worst = _ceil_div(input_len + max_tokens - 1, page_size) - cached_len // page_size
        if worst + reserved > free_pages + evictable_pages:
            break
        evictable_pages -= lock_pages
        token_budget -= input_len - cached_len
        reserved += worst
        admitted += 1
    return admitted
