# 作弊：match 交出节点自己的 value（别名）
# 为什么必须判错：题目要求 match 返回新的列表，调用者改它树不受影响；它在命中正好是一个节点时交出节点自己的 value，调用者改返回值就改坏了树里的槽位。
# 判词里要有：match 要交出新的列表
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_match = RadixTree.match


def _match_alias(self, ids):
    n, values = _match(self, ids)
    child = self.root.children.get(self._first_page(list(ids)))
    if child is not None and 0 < n == len(child.key):  # 命中正好是一个节点：省一次拷贝
        return n, child.value
    return n, values


RadixTree.match = _match_alias
