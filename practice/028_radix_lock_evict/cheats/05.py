# 作弊：evict 返回的槽位排了序
# 为什么必须判错：题目要求 evict 返回的槽位按逐出的先后拼起来；它把槽位排了序，逐出多片叶子、先走的叶子槽位号更大时顺序就不对。
# 判词里要有：按逐出的先后
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_evict_in_order = RadixCache.evict


def _evict_sorted(self, size):
    return sorted(_evict_in_order(self, size))


RadixCache.evict = _evict_sorted
