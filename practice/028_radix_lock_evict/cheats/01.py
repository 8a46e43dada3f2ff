# 作弊：锁从父节点开始，句柄自己的节点没锁上
# 为什么必须判错：题目要求 lock 从 node 自己开始（包括它）一直锁到根；它从父节点开始，句柄自己的节点没锁上、ref_count 还是 0，算在 evictable_size 里，会被当成可逐出的叶子拿走。
# 判词里要有：自己的节点没锁上
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_lock = RadixCache.lock


def _lock_from_parent(self, node, unlock=False):
    if node is not self.root:
        _lock(self, node.parent, unlock)


RadixCache.lock = _lock_from_parent
