# 作弊：只给提示留页（乐观接纳）
# 为什么必须判错：题目要求按最坏情况留页：ceil((prompt_len + max_tokens - 1) / page_size)；它只给提示留页，生成的 token 将来要的页没算，页不宽裕时接纳了太多请求，跑下去 KV 池会不够。
# 判词里要有：只给提示留了页
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def admit(queue, *, free_rows, free_pages, inflight, page_size, token_budget):
    _check_page_size(page_size)
    pages_left, admitted = free_pages - inflight, []
    for i, (prompt_len, max_tokens) in enumerate(queue):
        if not free_rows or (admitted and prompt_len > token_budget):
            break
        worst = _div_ceil(prompt_len, page_size)
        if worst > pages_left:
            break
        admitted.append(i)
        free_rows, token_budget, pages_left = free_rows - 1, token_budget - prompt_len, pages_left - worst
    return admitted
