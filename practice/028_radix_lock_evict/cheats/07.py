# 作弊：解锁时只看最上面那个节点（根的孩子）的计数，句柄自己的节点不查
# 为什么必须判错：锁是从句柄的节点一路数到根的；上面的节点被别的句柄锁着、句柄自己的节点却没锁住时，这样解锁会把计数减成负数、把别人的锁解掉，题目要求这时抛 ValueError、什么都不改。
# 判词里要有：还没锁就再解锁
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def _lock_checking_top(self, node, unlock=False):
    if unlock:
        top = node
        while top is not self.root and top.parent is not self.root:
            top = top.parent
        if top is not self.root and top.ref_count <= 0:
            raise ValueError("这个句柄没被锁住，不能解锁")
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


RadixCache.lock = _lock_checking_top
