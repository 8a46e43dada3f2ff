# 作弊：拿整个提示去匹配，一模一样的提示要算 0 个 token
# 为什么必须判错：最后一个位置总要算，它的 logits 给出第一个输出 token；引擎匹配的是提示去掉最后一个 token。
# 判词里要有：最后一个 token
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_checked = prefill_costs


def prefill_costs(batches, page_size):
    _checked(batches, page_size)
    cached, costs = [], []
    for batch in batches:
        row = []
        for prompt in batch:
            hit = max((_common(prompt, seq) for seq in cached), default=0)
            row.append(len(prompt) - (hit - hit % page_size))
        costs.append(row)
        cached += batch
    return costs
