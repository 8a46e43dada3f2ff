# 作弊：放不下的请求跳过去，接着试后面的
# 为什么必须判错：题目要求先来先服务：哪一条检查不通过就停下，后面的小请求放得下也不许插队；它跳过放不下的请求接着试后面的，队列中间有大请求时接纳了排在后面的请求。
# 判词里要有：插了队
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def admit(queue, *, free_rows, free_pages, inflight, page_size, token_budget):
    _check_page_size(page_size)
    pages_left, admitted = free_pages - inflight, []
    for i, (prompt_len, max_tokens) in enumerate(queue):
        worst = _div_ceil(prompt_len + max_tokens - 1, page_size)
        if free_rows and (not admitted or prompt_len <= token_budget) and worst <= pages_left:
            admitted.append(i)
            free_rows, token_budget, pages_left = free_rows - 1, token_budget - prompt_len, pages_left - worst
    return admitted
