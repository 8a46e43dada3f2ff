# 作弊：被切开的请求排到队尾
# 为什么必须判错：题目要求被切开的请求下一步回到队首、从断开处接着算；它把切开的请求排到队尾，队列里还有别的请求时后面的请求插到了它前面，每一步的批都和参考不一样。
# 判词里要有：回到队首
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

from collections import deque
def plan_prefill(input_lens, token_budget, cached_lens=None):
    cached_lens = cached_lens or [0] * len(input_lens)
    if token_budget < 1 or len(cached_lens) != len(input_lens) or any(n < 1 or not 0 <= c < n for n, c in zip(input_lens, cached_lens)):
        raise ValueError("参数不对")
    queue, pos, steps = deque(range(len(input_lens))), list(cached_lens), []
    while queue:
        budget, batch = token_budget, []
        while budget > 0 and queue:
            i = queue.popleft()
            end = min(input_lens[i], pos[i] + budget)
            batch.append((i, pos[i], end)); budget -= end - pos[i]; pos[i] = end
            if end < input_lens[i]:
                queue.append(i)
                break
        steps.append(batch)
    return steps
