# 作弊：不去掉比 max_running_req 大的档位
# 为什么必须判错：题目要求去掉它们：同时在跑的请求不会比上限多，这些档位录了也永远用不上，只白花录制（编译）的时间和图的内存。
# 判词里要有：capture_sizes
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_sizes = capture_sizes


def capture_sizes(explicit, max_bs, max_running_req):
    _sizes(explicit, max_bs, max_running_req)
    return _sizes(explicit, max_bs, 10**9)
