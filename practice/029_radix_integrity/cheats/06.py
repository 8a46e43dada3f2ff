# 作弊：重复的槽位只和别的节点比（同一个节点里的不查）
# 为什么必须判错：题目要求同一个槽位在整棵树里只出现一次，同一个节点里也算；它只拿每个节点和之前见过的节点比，同一个节点里同一页出现两次的破坏查不出来。
# 判词里要有：同一个节点里同一页出现了两次

def check_integrity(cache):
    ps = cache.page_size
    evictable = protected = 0
    seen = set()
    stack = [cache.root]
    while stack:
        node = stack.pop()
        below = 0
        for first, child in node.children.items():
            if child.parent is not node or len(child.key) != len(child.value):
                raise ValueError("parent 或长度不对")
            if not child.key or len(child.key) % ps or first != tuple(child.key[:ps]):
                raise ValueError("不是整页，或孩子表的键不对")
            for i in range(0, len(child.value), ps):
                page = child.value[i : i + ps]
                if page != list(range(page[0], page[0] + ps)) or page[0] % ps:
                    raise ValueError("不是一整页")
            if seen.intersection(child.value):
                raise ValueError("槽位出现两次")
            seen.update(child.value)
            if child.ref_count < 0:
                raise ValueError("锁计数是负数")
            if child.ref_count == 0:
                evictable += len(child.key)
            else:
                protected += len(child.key)
            below += child.ref_count
            stack.append(child)
        if node is not cache.root and node.ref_count < below:
            raise ValueError("父节点的计数小于孩子们之和")
    if (evictable, protected) != (cache.evictable_size, cache.protected_size):
        raise ValueError("记账不符")
