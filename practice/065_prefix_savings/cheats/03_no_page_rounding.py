# 作弊：匹配长度不取整到整页
# 为什么必须判错：树按页存，不满一页的部分命中不了；page_size > 1 时这样数出来的要算的 token 偏少。
# 判词里要有：page_size 的倍数
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = prefill_costs


def prefill_costs(batches, page_size):
    _checked(batches, page_size)
    cached, costs = [], []
    for batch in batches:
        costs.append([len(p) - max((_common(p[:-1], seq) for seq in cached), default=0) for p in batch])
        cached += batch
    return costs
