# 作弊：第 4 条只查页边界、不查连续
# 为什么必须判错：题目要求第 4 条：每页从页边界开始且 page_size 个槽位连续；它只查页边界、不查连续，一页里后面的槽位不连续的破坏（page_size > 1）查不出来。
# 判词里要有：后面的槽位却不连续｜一页里的槽位不是从页边界开始的连续

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
                if page[0] % ps or len(page) != ps:
                    raise ValueError("不是一整页")
            for slot in child.value:
                if slot in seen:
                    raise ValueError("槽位出现两次")
                seen.add(slot)
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
