"""练习 048 · 环形 all-reduce：每个 rank 只发 2(n−1)/n 份数据（第 16 章 张量并行）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def chunk_bounds(length: int, n: int) -> list[int]:
    """长为 length 的向量切成 n 块的边界 [b0, b1, …, bn]：第 i 块是 [b[i], b[i+1])，b[i] = i * length // n。

    n 不是正数、length 是负数时抛 ValueError。
    """
    raise NotImplementedError


def ring_all_reduce(rank: int, n: int, data: list):
    """第 rank 个 rank（共 n 个）的程序，写成生成器：

        incoming = yield outgoing

    是一步通信：outgoing（一块，list）发给右邻居 (rank + 1) % n，incoming 是左邻居这一步发来的那块。
    2(n − 1) 步之后 return 所有 rank 的 data 逐元素之和（新的 list）。rank 或 n 不合法时抛 ValueError。
    """
    raise NotImplementedError
    yield  # 函数体里有 yield，它才是生成器函数
