# 作弊：第 7 章的做法：第一个请求比预算长也整段收下
# 为什么必须判错：题目要求每步最多送 token_budget 个 token，放不下的请求只收预算够的那一段（切块）；它照第 7 章不切块，队首请求比预算长时整段收下，这一步用的 token 超过了预算。
# 判词里要有：超过了预算
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def plan_prefill(input_lens, token_budget, cached_lens=None):
    cached_lens = cached_lens or [0] * len(input_lens)
    if token_budget < 1 or len(cached_lens) != len(input_lens) or any(n < 1 or not 0 <= c < n for n, c in zip(input_lens, cached_lens)):
        raise ValueError("参数不对")
    steps, head = [], 0
    while head < len(input_lens):
        budget, batch = token_budget, []
        while head < len(input_lens) and (not batch or input_lens[head] - cached_lens[head] <= budget):
            batch.append((head, cached_lens[head], input_lens[head]))
            budget -= input_lens[head] - cached_lens[head]
            head += 1
        steps.append(batch)
    return steps
