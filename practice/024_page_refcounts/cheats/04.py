# 作弊：release 不查页号（-1 被当成最后一页）
# 为什么必须判错：题目要求页号不存在时 release 抛 ValueError、什么都不改；它不查页号，-1 在 Python 列表里被当成最后一页，悄悄放下了最后一页的一份持有。
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
