# 作弊：把 size 当成页数（上游 #80 的反面）
# 为什么必须判错：它绕过了这道题的要点（把 size 当成页数（上游 #80 的反面）），只在测试没查到的地方才“对”。
# 判词里要有：按 token 计
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_evict = RadixCache.evict


def _evict_pages(self, size):
    return _evict(self, size // self.page_size)  # 调用者把 token 数当页数传


RadixCache.evict = _evict_pages
