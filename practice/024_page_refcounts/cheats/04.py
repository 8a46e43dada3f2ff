# 作弊：release 不查页号（-1 被当成最后一页）
# 为什么必须判错：它绕过了这道题的要点（release 不查页号（-1 被当成最后一页）），只在测试没查到的地方才“对”。
# 判词里要有：-1 号页不存在
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _release_unchecked(self, pages):
    from collections import Counter
    for page, times in Counter(pages).items():
        if self._refs[page] < times:
            raise ValueError("放多了")
    freed = []
    for page in pages:
        self._refs[page] -= 1
        if self._refs[page] == 0:
            self._free.append(page)
            freed.append(page)
    return freed


PagePool.release = _release_unchecked
