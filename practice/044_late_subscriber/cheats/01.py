# 作弊：只睡 50 ms，不确认订阅生效
# 为什么必须判错：题目要求握手确认每个 rank 的订阅都生效了再返回（订阅什么时候生效事先不知道）；它只睡 50 ms 就返回，订阅生效得更晚时 rank 0 的前几帧真消息被丢掉。
# 判词里要有：订阅还没生效

import time

def handshake(rank, pub, sub, all_reduce_min):
    time.sleep(0.05)
    all_reduce_min(1)
