# 作弊：短的先来（不是先来先服务）
# 为什么必须判错：题目要求按到达顺序先来先服务；它先把请求按 max_tokens 从短到长排序再模拟，短请求插到前面，max_tokens 不是递增的队列每一步的批都不一样。
# 判词里要有：先来先服务
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_fcfs = simulate
def simulate(requests, max_running, continuous):
    return _fcfs(sorted(requests, key=lambda r: r[1]), max_running, continuous)
