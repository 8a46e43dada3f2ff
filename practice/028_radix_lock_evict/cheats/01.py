# 作弊：锁从父节点开始，句柄自己的节点没锁上
# 为什么必须判错：它绕过了这道题的要点（锁从父节点开始，句柄自己的节点没锁上），只在测试没查到的地方才“对”。
# 判词里要有：自己的节点没锁上
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_lock = RadixCache.lock


def _lock_from_parent(self, node, unlock=False):
    if node is not self.root:
        _lock(self, node.parent, unlock)


RadixCache.lock = _lock_from_parent
