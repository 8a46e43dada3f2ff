# 作弊：空闲的 rank ≥ 1 先进广播，再等第一条
# 为什么必须判错：题目要求 blocking 时 rank ≥ 1 先在 sub.get() 上等到第一条，再调用 broadcast；它先进 broadcast 再等第一条，空闲的 rank 在集合操作里等着外面的消息，次序和题目规定的不一样。
# 判词里要有：就进了 broadcast

def receive(rank, blocking, inbox, pub, sub, broadcast):
    if rank == 0:
        first = [inbox.wait()] if blocking else []
        rest = inbox.poll()
        for m in first + rest: pub.put(m)
        broadcast(len(rest))
        return first + rest
    n = broadcast(0)   # idle rank waits in the collective, not on sub
    first = [sub.get()] if blocking else []
    return first + [sub.get() for _ in range(n)]
