# 作弊：只查 free_pages 是不是负数
# 为什么必须判错：题目要求 free_pages、evictable_pages、free_rows、token_budget 任何一个是负数都抛 ValueError；它只查 free_pages，evictable_pages 等是负数时不报错、接着算。
# 判词里要有：evictable_pages 是负数｜free_rows 是负数｜token_budget 是负数
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_validate_all = _validate
def _validate(pending, running, page_size, counts):
    _validate_all(pending, running, page_size, {"free_pages": counts["free_pages"]})
