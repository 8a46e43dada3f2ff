"""练习 028 · 锁计数与 LRU 逐出 —— 参考答案。"""

from __future__ import annotations


class Node:
    def __init__(self, key: list[int], value: list[int], parent: Node | None, last_access: int) -> None:
        self.key = key  # 这一段 token（长度是 page_size 的整数倍）
        self.value = value  # 这些 token 的槽位
        self.parent = parent
        self.children: dict[tuple[int, ...], Node] = {}  # 孩子 key 的第一页 -> 孩子
        self.ref_count = 0  # 有几个锁住的句柄经过这个节点
        self.last_access = last_access  # 最近一次被 match/insert 走过的时刻


class RadixCache:
    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.root = Node([], [], None, 0)
        self.evictable_size = 0  # ref_count == 0 的节点的 token 数之和
        self.protected_size = 0  # ref_count > 0 的节点的 token 数之和
        self.clock = 0

    # ------------------------------------------------ 已经写好：匹配、插入、切分

    def match(self, ids: list[int]) -> tuple[int, Node]:
        """返回 (命中长度, 句柄节点)。没命中时句柄节点是根。"""
        node, matched = self._walk(list(ids))
        return matched, node

    def insert(self, ids: list[int], values: list[int]) -> tuple[int, Node]:
        """返回 (插入前已缓存的长度, 整段前缀的句柄节点)。新节点的长度记进 evictable_size。"""
        n = len(ids) - len(ids) % self.page_size
        ids, values = list(ids[:n]), list(values[:n])
        node, matched = self._walk(ids)
        if matched < n:
            child = Node(ids[matched:], values[matched:], node, self.clock)
            node.children[tuple(child.key[: self.page_size])] = child
            self.evictable_size += len(child.key)
            node = child
        return matched, node

    def _walk(self, ids: list[int]) -> tuple[Node, int]:
        self.clock += 1
        node, matched = self.root, 0
        while matched < len(ids):
            rest = ids[matched:]
            child = node.children.get(tuple(rest[: self.page_size]))
            if child is None:
                break
            n = 0
            while n < min(len(child.key), len(rest)) and child.key[n] == rest[n]:
                n += 1
            n -= n % self.page_size
            partial = n < len(child.key)
            if partial:
                child = self._split(child, n)
            child.last_access = self.clock
            node, matched = child, matched + n
            if partial:
                break
        return node, matched

    def _split(self, node: Node, n: int) -> Node:
        head = Node(node.key[:n], node.value[:n], node.parent, node.last_access)
        head.ref_count = node.ref_count  # 经过后半段的锁都经过前半段：大小不变
        node.parent.children[tuple(head.key[: self.page_size])] = head
        node.key, node.value = node.key[n:], node.value[n:]
        node.parent = head
        head.children[tuple(node.key[: self.page_size])] = node
        return head

    # ------------------------------------------------ 要写的部分

    def lock(self, node: Node, unlock: bool = False) -> None:
        """锁住（unlock=True 时解锁）从 node 到根的每个节点，维护 evictable_size / protected_size。"""
        while node is not self.root:  # 从句柄自己的节点开始，根不计数
            if unlock:
                if node.ref_count <= 0:
                    raise ValueError("这个节点没被锁住，不能解锁")
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

    def evict(self, size: int) -> list[int]:
        """逐出至少 size 个 token：每次拿走最久没访问、没被锁住的叶子，返回被逐出的槽位。"""
        if size > self.evictable_size:
            raise ValueError(f"要逐出 {size} 个 token，只有 {self.evictable_size} 个可以逐出")
        candidates, stack = [], list(self.root.children.values())
        while stack:
            node = stack.pop()
            stack.extend(node.children.values())
            if not node.children and node.ref_count == 0:
                candidates.append(node)
        evicted: list[int] = []
        while len(evicted) < size:
            leaf = min(candidates, key=lambda n: n.last_access)
            candidates.remove(leaf)
            parent = leaf.parent
            del parent.children[tuple(leaf.key[: self.page_size])]
            evicted += leaf.value
            self.evictable_size -= len(leaf.key)
            if parent is not self.root and not parent.children and parent.ref_count == 0:
                candidates.append(parent)  # 最后一个孩子走了：父节点成了叶子
        return evicted
