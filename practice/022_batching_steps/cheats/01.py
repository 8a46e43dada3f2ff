# 作弊：静态批处理也在有空位时接纳（当成连续批处理）
# 为什么必须判错：它绕过了这道题的要点（静态批处理也在有空位时接纳（当成连续批处理）），只在测试没查到的地方才“对”。
# 判词里要有：静态批处理在还有请求在跑的时候接纳了新请求
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_continuous = simulate
def simulate(requests, max_running, continuous):
    return _continuous(requests, max_running, True)
