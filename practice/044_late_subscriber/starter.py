"""练习 044 · 握手：迟到的订阅者一条也不丢（第 14 章 调度器的收发与多 rank 同步）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def handshake(rank: int, pub, sub, all_reduce_min) -> None:
    """每个 rank 调用一次；全部返回之后，rank 0 pub.put 的每一帧都一条不少地到达每个 rank。

    rank 0：pub.put(frame)（sub 是 None）。rank ≥ 1：sub.empty()、sub.get()（pub 是 None）。
    all_reduce_min(v)：集合操作，返回所有 rank 的 v 的最小值。真消息从不以 b"\\x00" 开头。
    """
    raise NotImplementedError
