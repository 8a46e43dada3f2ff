# 作弊：阻塞等到的第一条也算进广播的条数
# 为什么必须判错：题目要求阻塞等到的第一条不计入广播的条数；它把第一条也算进去，rank ≥ 1 除了先等的那一条再取 count 条，多等一条：要么拿走下一步的消息，要么一直等不到、等不齐所有 rank。
# 判词里要有：同一步收到的消息必须相同｜等不齐所有 rank

"""练习 043 的参考答案。"""

from __future__ import annotations


def receive(rank: int, blocking: bool, inbox, pub, sub, broadcast) -> list[str]:
    if rank == 0:
        first = [inbox.wait()] if blocking else []
        rest = inbox.poll()
        for msg in first + rest:  # 先转发：其他 rank 拿到条数时，要的消息已经在路上
            pub.put(msg)
        broadcast(len(first + rest))  # 第一条不计：其他 rank 等它的时候不在广播里
        return first + rest
    first = [sub.get()] if blocking else []
    count = broadcast(0)
    return first + [sub.get() for _ in range(count)]  # 正好 count 条，多到的留给下一步
