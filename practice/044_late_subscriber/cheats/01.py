# 作弊：只睡 50 ms，不确认订阅生效
# 为什么必须判错：它绕过了这道题的要点（只睡 50 ms，不确认订阅生效），只在测试没查到的地方才“对”。
# 判词里要有：订阅还没生效

import time

def handshake(rank, pub, sub, all_reduce_min):
    time.sleep(0.05)
    all_reduce_min(1)
