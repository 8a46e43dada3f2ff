# 作弊：一还就空闲，不看还剩几份（上游的做法）
# 为什么必须判错：题目要求 release 只让每页少 1 份持有、降到 0 才回到空闲；它一还就空闲（上游的做法），被前缀缓存也持有的页（各剩 1 份）会被放回空闲、分给别人覆盖。
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
