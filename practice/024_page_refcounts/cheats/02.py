# 作弊：hold 不查空闲页
# 为什么必须判错：它绕过了这道题的要点（hold 不查空闲页），只在测试没查到的地方才“对”。
# 判词里要有：里面有空闲页
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _hold(self, pages):
    self._check_pages(pages)
    for page in pages:
        if self._refs[page] == 0 and page in self._free:
            self._free.remove(page)
        self._refs[page] += 1
PagePool.hold = _hold
