# 作弊：不读掉晚到的探针
# 为什么必须判错：题目要求 handshake 之后 sub.get() 到的第一帧就是 rank 0 的第一条真消息；它 rank ≥ 1 握手后不把后到的探针和 READY 帧读掉，握手后 get 到的第一帧是 \x00 开头的握手帧。
# 判词里要有：不是真消息

"""练习 044 的参考答案。"""

from __future__ import annotations

import time

PROBE = b"\x00probe"  # "有人听得到吗"
READY = b"\x00ready"  # "都听到了，下一帧起是真消息"


def handshake(rank: int, pub, sub, all_reduce_min) -> None:
    heard = rank == 0  # rank 0 自己不用听
    while True:
        if rank == 0:
            pub.put(PROBE)
        elif not heard:
            time.sleep(0.002)  # 给这一轮的探针一点在路上的时间
            heard = not sub.empty()
        if all_reduce_min(int(heard)) == 1:  # 人人都听到过：订阅都已生效
            break
    if rank == 0:
        pub.put(READY)
    else:
        pass
