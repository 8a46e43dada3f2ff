# 作弊：不管缓存，每个请求都算整个提示（naive 的数）
# 为什么必须判错：题目问的正是前缀缓存省下多少；共享系统提示的第二批起就该少算。
# 判词里要有：不对
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = prefill_costs


def prefill_costs(batches, page_size):
    _checked(batches, page_size)
    return [[len(p) for p in batch] for batch in batches]
