# 作弊：只重新数两个总数
# 为什么必须判错：题目要求七条规矩都查；它只核对 evictable_size 和 protected_size，孩子的计数之和比父节点多、value 变短、半页、键不对、parent 指错、槽位重复等破坏都查不出来。
# 判词里要有：孩子们的计数之和
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def check_integrity(cache):
    evictable = protected = 0
    stack = list(cache.root.children.values())
    while stack:
        node = stack.pop()
        stack.extend(node.children.values())
        if node.ref_count == 0:
            evictable += len(node.key)
        else:
            protected += len(node.key)
    if (evictable, protected) != (cache.evictable_size, cache.protected_size):
        raise ValueError("记账不符")
