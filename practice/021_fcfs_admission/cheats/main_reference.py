# 作弊：调用 __main__ 里 test.py 自己的参考实现
# 为什么必须判错：旧评测里 __main__ 就是 test.py，它的参考实现拿来就能用。现在参考实现只在评测进程里，你的进程里的 __main__ 是评测的协议，没有它们
# 通用作弊：旧的评测让学习者的代码和 test.py 在同一个进程里跑，这一招对每道题都管用

import sys

_test = sys.modules["__main__"]


def inflight_pages(running, page_size):
    return _test.ref_inflight(running, page_size)


def admit(queue, *, free_rows, free_pages, inflight, page_size, token_budget):
    return _test.ref_admit(queue, free_rows, free_pages, inflight, page_size, token_budget)
