# 作弊：第 4 条只查每个节点的第一页（旧评测只在第一页上做破坏）
# 为什么必须判错：规矩对 value 里的每一页都成立；节点的第二页、第三页不连续或者不从页边界开始，逐出时一样会还错页。
# 判词里要有：一页
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

def check_integrity(cache: Cache) -> None:
    """把整棵树重新数一遍；任何一条规矩不成立就抛 ValueError（说清楚是哪个节点、哪条规矩）。"""
    ps = cache.page_size
    evictable = protected = 0
    seen: set[int] = set()
    stack = [(cache.root, ())]
    while stack:
        node, prefix = stack.pop()
        below = 0
        for first, child in node.children.items():
            where = f"前缀 {list(prefix)} 下 key={child.key} 的节点"
            if child.parent is not node:
                raise ValueError(f"{where}：parent 不是它所在孩子表的主人")
            if len(child.key) != len(child.value):
                raise ValueError(f"{where}：key 有 {len(child.key)} 个，value 有 {len(child.value)} 个")
            if not child.key or len(child.key) % ps != 0:
                raise ValueError(f"{where}：长度 {len(child.key)} 不是页大小 {ps} 的正整数倍")
            if first != tuple(child.key[:ps]):
                raise ValueError(f"{where}：孩子表里的键 {first} 不是它的第一页")
            for i in range(0, min(ps, len(child.value)), ps):  # 只查第一页
                page = child.value[i : i + ps]
                if page[0] % ps != 0 or page != list(range(page[0], page[0] + ps)):
                    raise ValueError(f"{where}：槽位 {page} 不是一整页")
            for slot in child.value:  # 逐个加进 set：同一个节点里重复的页也查得到
                if slot in seen:
                    raise ValueError(f"{where}：槽位 {slot} 在树里出现了两次")
                seen.add(slot)
            if child.ref_count < 0:
                raise ValueError(f"{where}：锁计数是负数 {child.ref_count}")
            if child.ref_count == 0:
                evictable += len(child.key)
            else:
                protected += len(child.key)
            below += child.ref_count
            stack.append((child, prefix + tuple(child.key)))
        # 锁一个句柄，路径上每个节点都 +1：父节点的计数不少于孩子们的计数之和（根不计数）
        if node is not cache.root and node.ref_count < below:
            raise ValueError(f"前缀 {list(prefix)} 处的节点：锁计数 {node.ref_count} 小于孩子们的计数之和 {below}")
    if (evictable, protected) != (cache.evictable_size, cache.protected_size):
        raise ValueError(f"记账不符：数出可逐出 {evictable}、受保护 {protected}，"
                         f"记录是 {cache.evictable_size}、{cache.protected_size}")
