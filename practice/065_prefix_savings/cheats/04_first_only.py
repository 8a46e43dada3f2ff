# 作弊：只和最早进树的那一条序列比
# 为什么必须判错：树里有很多条序列：两段不同的系统提示、互不相干的提示之后又来了一样的，都要取最长的公共前缀。
# 判词里要有：每一条
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = prefill_costs


def prefill_costs(batches, page_size):
    _checked(batches, page_size)
    first, costs = None, []
    for batch in batches:
        row = []
        for prompt in batch:
            hit = _common(prompt[:-1], first) if first is not None else 0
            row.append(len(prompt) - (hit - hit % page_size))
        costs.append(row)
        if first is None:
            first = batch[0]
    return costs
