# 作弊：把 size 当成页数（上游 #80 的反面）
# 为什么必须判错：题目要求 evict(size) 逐出至少 size 个 token（不是页）；它把 size 当页数、除以 page_size，page_size > 1 时逐出的 token 不够，调用者以为腾出的空间其实没腾出来。
# 判词里要有：按 token 计
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_evict = RadixCache.evict


def _evict_pages(self, size):
    return _evict(self, size // self.page_size)  # 调用者把 token 数当页数传


RadixCache.evict = _evict_pages
