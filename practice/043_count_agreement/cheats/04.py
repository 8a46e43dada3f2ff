# 作弊：空闲的 rank ≥ 1 先进广播，再等第一条
# 为什么必须判错：它绕过了这道题的要点（空闲的 rank ≥ 1 先进广播，再等第一条），只在测试没查到的地方才“对”。
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
