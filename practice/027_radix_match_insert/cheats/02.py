# 作弊：新节点直接存调用者的列表（不拷贝）
# 为什么必须判错：题目要求树里存 ids、values 自己的拷贝；它整段插入时直接存调用者的列表，调用者之后改自己的列表（比如页表那一行给下一个请求用），树里的槽位跟着变。
# 判词里要有：拷贝
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _insert_without_copy(self, ids, values):
    if len(ids) != len(values):
        raise ValueError("长度不同")
    n = len(ids) - len(ids) % self.page_size
    node, matched = self._walk(list(ids[:n]))
    if matched < n:
        whole = matched == 0 and n == len(ids)
        child = Node(ids if whole else ids[matched:n], values if whole else values[matched:n], node)
        node.children[tuple(child.key[: self.page_size])] = child
    return matched


RadixTree.insert = _insert_without_copy
