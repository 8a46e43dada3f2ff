# 作弊：不发“准备好了”，只读掉已经到了的探针
# 为什么必须判错：题目要求 handshake 之后 get 到的第一帧是第一条真消息；它不发“准备好了”、只读掉已经到了的探针，还在路上的探针之后才到，握手后 get 到的第一帧是探针、不是真消息。
# 判词里要有：不是真消息

import time
def handshake(rank, pub, sub, all_reduce_min):
    heard = rank == 0
    while True:
        if rank == 0:
            pub.put(b"\x00p")
        elif not heard:
            time.sleep(0.002); heard = not sub.empty()
        if all_reduce_min(int(heard)) == 1:
            break
    if rank != 0:
        while not sub.empty():   # drain probes without a READY frame
            sub.get()
