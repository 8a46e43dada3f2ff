# 作弊：每个请求算完就插进树，同一批后面的请求用上了前面请求的前缀
# 为什么必须判错：同一批的请求同时 prefill，谁的 KV 也还没算出来；这样数出来比真实的引擎乐观，消融里 16 个请求同时到达时 radix 的收益会被高估。
# 判词里要有：同一批
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = prefill_costs


def prefill_costs(batches, page_size):
    _checked(batches, page_size)  # 只为了同样地检查参数
    cached, costs = [], []
    for batch in batches:
        row = []
        for prompt in batch:
            hit = max((_common(prompt[:-1], seq) for seq in cached), default=0)
            row.append(len(prompt) - (hit - hit % page_size))
            cached.append(prompt)
        costs.append(row)
    return costs
