# 作弊：解锁不查计数
# 为什么必须判错：题目要求解锁一个 ref_count 已经是 0 的节点时抛 ValueError、什么都不改；它不查就减，多解一次锁时计数变成负数、两个总数也记错了。
# 判词里要有：还没锁就再解锁
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _lock_unchecked(self, node, unlock=False):
    while node is not self.root:
        if unlock:
            node.ref_count -= 1
            if node.ref_count == 0:
                self.protected_size -= len(node.key)
                self.evictable_size += len(node.key)
        else:
            if node.ref_count == 0:
                self.evictable_size -= len(node.key)
                self.protected_size += len(node.key)
            node.ref_count += 1
        node = node.parent


RadixCache.lock = _lock_unchecked
