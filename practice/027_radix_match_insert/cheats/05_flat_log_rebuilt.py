# 作弊：只记一张平的操作表，每次访问 root 都从头重放、现拼一棵新树
# 为什么必须判错：题目要的是一棵一直存在、在切分处才新建节点的基数树；每次现拼出来的树形状对，节点却每次都是新对象
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_RealTree = RadixTree


class RadixTree:
    def __init__(self, page_size):
        self.page_size = page_size
        self._log = []
        _RealTree(page_size)  # 参数检查照旧

    def _replay(self):
        tree = _RealTree(self.page_size)
        for op, args in self._log:
            getattr(tree, op)(*args)
        return tree

    def insert(self, ids, values):
        result = self._replay().insert(list(ids), list(values))
        self._log.append(("insert", (list(ids), list(values))))
        return result

    def match(self, ids):
        result = self._replay().match(list(ids))
        self._log.append(("match", (list(ids),)))
        return result

    @property
    def root(self):
        return self._replay().root
