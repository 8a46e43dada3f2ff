# 作弊：固定睡 0.35 秒
# 为什么必须判错：题目要求确认订阅生效，不能靠睡一段固定的时间；它睡 0.35 秒就当握好了，订阅生效得比这更晚时握手已经返回，前面的真消息被丢掉。
# 判词里要有：订阅还没生效

import time
def handshake(rank, pub, sub, all_reduce_min):
    time.sleep(0.35)   # fixed sleep > judge's max join delay (0.3 s)
    all_reduce_min(1)
