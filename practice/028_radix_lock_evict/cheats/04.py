# 作弊：evict 不先查 size（逐出一半才抛错）
# 为什么必须判错：题目要求 size 大于 evictable_size 时先抛 ValueError、什么都不改；它不先查，一边逐出一边等候选用完才报错，抛错时前面的叶子已经从树上摘掉了。
# 判词里要有：出错时什么都不改
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _evict_no_precheck(self, size):
    candidates, stack = [], list(self.root.children.values())
    while stack:
        node = stack.pop()
        stack.extend(node.children.values())
        if not node.children and node.ref_count == 0:
            candidates.append(node)
    evicted = []
    while len(evicted) < size:  # 候选用完时 min([]) 自己抛 ValueError，可前面的叶子已经走了
        leaf = min(candidates, key=lambda n: n.last_access)
        candidates.remove(leaf)
        parent = leaf.parent
        del parent.children[tuple(leaf.key[: self.page_size])]
        evicted += leaf.value
        self.evictable_size -= len(leaf.key)
        if parent is not self.root and not parent.children and parent.ref_count == 0:
            candidates.append(parent)
    return evicted


RadixCache.evict = _evict_no_precheck
