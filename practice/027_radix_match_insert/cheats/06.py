# 作弊：只在 values 不够整页部分时才报错（按页截断以后再比长度）
# 为什么必须判错：题目要求 ids 和 values 长度不同就抛 ValueError；values 多了、或者只差在不满一页的尾巴上，也是调用者给错了，不能悄悄截掉。
# 判词里要有：长度不一样
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _insert_lenient(self, ids, values):
    n = len(ids) - len(ids) % self.page_size
    if len(values) < n:
        raise ValueError(f"values 只有 {len(values)} 个，不够 {n} 个")
    ids, values = list(ids[:n]), list(values[:n])
    node, matched = self._walk(ids)
    if matched < n:
        child = Node(ids[matched:], values[matched:], node)
        node.children[self._first_page(child.key)] = child
    return matched


RadixTree.insert = _insert_lenient
