# 作弊：调用 __main__ 里 test.py 自己的参考实现
# 为什么必须判错：旧评测里 __main__ 就是 test.py，它的参考实现拿来就能用。现在参考实现只在评测进程里，你的进程里的 __main__ 是评测的协议，没有它们
# 通用作弊：旧的评测让学习者的代码和 test.py 在同一个进程里跑，这一招对每道题都管用

import sys

_test = sys.modules["__main__"]


def extend_lens(spans):
    for cached, device in spans:
        if not 0 <= cached <= device:
            raise ValueError("span 不对")
    return [device - cached for cached, device in spans]


def batch_positions(spans):
    extend_lens(spans)
    return _test.ref_positions(spans)


def cu_seqlens(lengths):
    return _test.ref_cu_seqlens(lengths)


def last_token_indices(spans):
    extend_lens(spans)
    return _test.ref_last_indices(spans)
