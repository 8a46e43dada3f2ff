# 作弊：其他 rank 有多少取多少（不按广播的条数）
# 为什么必须判错：题目要求其他 rank 按广播的条数取，不能有多少取多少（转发有延迟）；它 rank ≥ 1 用 sub.poll() 有多少取多少，转发还在路上时取少了、或多取了下一步的，同一步各 rank 收到的消息不一样。
# 判词里要有：同一步收到的消息必须相同

"""练习 043 的参考答案。"""

from __future__ import annotations


def receive(rank: int, blocking: bool, inbox, pub, sub, broadcast) -> list[str]:
    if rank == 0:
        first = [inbox.wait()] if blocking else []
        rest = inbox.poll()
        for msg in first + rest:  # 先转发：其他 rank 拿到条数时，要的消息已经在路上
            pub.put(msg)
        broadcast(len(rest))  # 第一条不计：其他 rank 等它的时候不在广播里
        return first + rest
    first = [sub.get()] if blocking else []
    broadcast(0)
    return first + sub.poll()  # 正好 count 条，多到的留给下一步
