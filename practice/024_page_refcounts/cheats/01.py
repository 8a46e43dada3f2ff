# 作弊：一还就空闲，不看还剩几份（上游的做法）
# 为什么必须判错：它绕过了这道题的要点（一还就空闲，不看还剩几份（上游的做法）），只在测试没查到的地方才“对”。
# 判词里要有：各剩 1 份
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_orig_release = PagePool.release
def _release(self, pages):
    self._check_pages(pages)
    freed = []
    for page in pages:
        if self._refs[page] == 0:
            raise ValueError("放多了")
        if page not in self._free:
            self._refs[page] = 0
            self._free.append(page)
            freed.append(page)
    return freed
PagePool.release = _release
