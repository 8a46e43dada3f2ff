# 作弊：空闲的 rank ≥ 1 先进广播，第一条也计数
# 为什么必须判错：题目要求 blocking 时各 rank 先等到一条（rank ≥ 1 等在 sub.get() 上）再进 broadcast，第一条不计数；它让空闲的 rank ≥ 1 没等到消息就进了 broadcast，还把第一条算进条数。
# 判词里要有：就进了 broadcast

def receive(rank, blocking, inbox, pub, sub, broadcast):
    # cheat: first message counted; idle ranks wait inside the collective
    if rank == 0:
        msgs = ([inbox.wait()] if blocking else []) + inbox.poll()
        for m in msgs: pub.put(m)
        broadcast(len(msgs))
        return msgs
    n = broadcast(0)
    return [sub.get() for _ in range(n)]
