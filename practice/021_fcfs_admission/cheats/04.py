# 作弊：在跑的请求把最后一个 token 也算进去
# 为什么必须判错：它绕过了这道题的要点（在跑的请求把最后一个 token 也算进去），只在测试没查到的地方才“对”。
# 判词里要有：不进 KV 池
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def inflight_pages(running, page_size):
    _check_page_size(page_size)
    return sum(_div_ceil(m, page_size) - _div_ceil(c, page_size) for c, m in running)
