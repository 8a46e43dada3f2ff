# 作弊：alloc 不够时先分了一部分再报错
# 为什么必须判错：题目要求空闲页不够时 alloc 抛 ValueError 且什么都不改；它一页一页地取，不够时已经取走的页留着 1 份持有（本应是 0），空闲页也少了。
# 判词里要有：应该是 0
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _alloc(self, n):
    pages = []
    while len(pages) < n:
        if not self._free:
            raise ValueError("不够")
        page = self._free.pop()
        self._refs[page] = 1
        pages.append(page)
    return pages
PagePool.alloc = _alloc
