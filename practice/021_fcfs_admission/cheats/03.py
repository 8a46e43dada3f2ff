# 作弊：不管在跑的请求将来要的页
# 为什么必须判错：题目要求可用页 = free_pages 减去在跑的请求还要的页（inflight）；它把 inflight 当 0，有请求在跑时多接纳了新请求，那些页其实已经预留给在跑的请求了。
# 判词里要有：没有减去在跑的请求还要的页
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_admit = admit
def admit(queue, *, free_rows, free_pages, inflight, page_size, token_budget):
    return _admit(queue, free_rows=free_rows, free_pages=free_pages, inflight=0, page_size=page_size,
                  token_budget=token_budget)
