# 作弊：固定睡 2 秒
# 为什么必须判错：题目要求订阅一生效握手就很快结束（允许 1 秒），不能靠睡很长时间；它一律睡满 2 秒，订阅早就生效了握手才返回，超出允许的时间。
# 判词里要有：握手才返回

import time
def handshake(rank, pub, sub, all_reduce_min):
    time.sleep(2.0)   # fixed sleep > judge's max join delay (0.3 s)
    all_reduce_min(1)
