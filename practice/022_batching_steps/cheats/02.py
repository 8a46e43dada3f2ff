# 作弊：prefill 的那一步把在跑的请求也带上
# 为什么必须判错：题目要求 prefill 这一步批里只有刚接纳的请求、在跑的请求不动；它把在跑的请求也放进 prefill 批并让它们多生成一个 token，有请求在跑时又接纳新请求（连续批处理）就错了。
# 判词里要有：prefill 这一步把在跑的请求也放进来了
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def simulate(requests, max_running, continuous):
    if max_running < 1 or any(m < 1 for _, m in requests) or len({u for u, _ in requests}) != len(requests):
        raise ValueError("参数不对")
    limit, queue, running, steps = dict(requests), [u for u, _ in requests], [], []
    produced = dict.fromkeys(limit, 0)
    while queue or running:
        free = max_running - len(running)
        if queue and free > 0 and (continuous or not running):
            new, queue = queue[:free], queue[free:]
            running = running + new
            batch = list(running)
            steps.append(("prefill", batch))
        else:
            batch = list(running)
            steps.append(("decode", batch))
        for u in batch:
            produced[u] += 1
        running = [u for u in running if produced[u] < limit[u]]
    return steps
