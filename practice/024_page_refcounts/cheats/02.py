# 作弊：hold 不查空闲页
# 为什么必须判错：题目要求 hold 只能给已经有人持有的页加份数，列表里有空闲页就抛 ValueError、什么都不改；它把空闲页从空闲列表里拿出来直接加 1，hold 一个空闲页不报错。
# 判词里要有：里面有空闲页
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _hold(self, pages):
    self._check_pages(pages)
    for page in pages:
        if self._refs[page] == 0 and page in self._free:
            self._free.remove(page)
        self._refs[page] += 1
PagePool.hold = _hold
