"""练习 043 · 按条数对齐：每个 rank 在同一步收到同样的消息（第 14 章 调度器的收发与多 rank 同步）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def receive(rank: int, blocking: bool, inbox, pub, sub, broadcast) -> list[str]:
    """这一步要处理的消息；每个 rank 每一步调用一次，各 rank 得到同样的列表。

    rank 0：inbox.poll() 取走已到的全部（不等），inbox.wait() 等到一条；pub.put(msg) 转发。
    rank ≥ 1：sub.get() 等着收下一条转发来的消息，sub.poll() 取走已送到的全部（不等）。
    broadcast(n)：每个 rank 每步恰好调用一次，返回 rank 0 传入的 n。
    blocking=True：先等到一条（不计入广播的条数），再取其余的；False：一条也不等。
    """
    raise NotImplementedError
