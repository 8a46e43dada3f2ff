# 作弊：匹配停在节点中间时不切分
# 为什么必须判错：题目要求匹配停在节点中间时把它切成两段；它只返回匹配长度、不切分，之后在节点中间分岔的 insert 挂不上去、整棵树的形状和参考对不上。
# 判词里要有：切成两段
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _match_without_split(self, ids):
    ids, node, matched, values = list(ids), self.root, 0, []
    while matched < len(ids):
        rest = ids[matched:]
        child = node.children.get(tuple(rest[: self.page_size]))
        if child is None:
            break
        n = 0
        while n < min(len(child.key), len(rest)) and child.key[n] == rest[n]:
            n += 1
        n -= n % self.page_size
        values, matched = values + child.value[:n], matched + n
        if n < len(child.key):
            break
        node = child
    return matched, values


RadixTree.match = _match_without_split
