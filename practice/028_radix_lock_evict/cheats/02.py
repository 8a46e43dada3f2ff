# 作弊：先逐出最近用过的叶子
# 为什么必须判错：题目要求每次逐出 last_access 最小（最久没用）的没锁叶子；它挑 last_access 最大的叶子，树里有两片以上可逐出的叶子时逐出的顺序和剩下的树都不对。
# 判词里要有：最久没用
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _evict_newest(self, size):
    if size > self.evictable_size:
        raise ValueError("不够")
    evicted = []
    while len(evicted) < size:
        leaves, stack = [], list(self.root.children.values())
        while stack:
            node = stack.pop()
            stack.extend(node.children.values())
            if not node.children and node.ref_count == 0:
                leaves.append(node)
        leaf = max(leaves, key=lambda n: n.last_access)
        del leaf.parent.children[tuple(leaf.key[: self.page_size])]
        evicted += leaf.value
        self.evictable_size -= len(leaf.key)
    return evicted


RadixCache.evict = _evict_newest
