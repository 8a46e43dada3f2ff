# 作弊：静态批处理也在有空位时接纳（当成连续批处理）
# 为什么必须判错：题目要求静态批处理只在一个请求都没在跑时才接纳新请求；它一律按连续批处理走，有空位就 prefill，静态批处理的那几组步骤全错，只有 continuous=True 时对。
# 判词里要有：静态批处理在还有请求在跑的时候接纳了新请求
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_continuous = simulate
def simulate(requests, max_running, continuous):
    return _continuous(requests, max_running, True)
