"""练习 027 · 按整页匹配和插入的 radix 树 —— 参考答案。"""

from __future__ import annotations


class Node:
    def __init__(self, key: list[int], value: list[int], parent: Node | None) -> None:
        self.key = key  # 这一段 token
        self.value = value  # 这些 token 的槽位，和 key 一样长
        self.parent = parent
        self.children: dict[tuple[int, ...], Node] = {}  # 孩子 key 的第一页 -> 孩子


class RadixTree:
    def __init__(self, page_size: int) -> None:
        if not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"page_size 必须是 ≥ 1 的整数：{page_size!r}")
        self.page_size = page_size
        self.root = Node([], [], None)

    def _first_page(self, key: list[int]) -> tuple[int, ...]:
        return tuple(key[: self.page_size])

    def _split(self, node: Node, n: int) -> Node:
        """把 node 切成前 n 个 token 的新节点 + 原节点（剩下的部分），返回新节点。"""
        head = Node(node.key[:n], node.value[:n], node.parent)
        node.parent.children[self._first_page(head.key)] = head
        node.key, node.value = node.key[n:], node.value[n:]
        node.parent = head
        head.children[self._first_page(node.key)] = node
        return head

    def _walk(self, ids: list[int]) -> tuple[Node, int]:
        node, matched = self.root, 0
        while matched < len(ids):
            rest = ids[matched:]
            child = node.children.get(self._first_page(rest))
            if child is None:  # 不足一页，或者没有孩子以这一页开头
                break
            n = 0
            while n < min(len(child.key), len(rest)) and child.key[n] == rest[n]:
                n += 1
            n -= n % self.page_size
            if n < len(child.key):
                return self._split(child, n), matched + n
            node, matched = child, matched + n
        return node, matched

    def match(self, ids: list[int]) -> tuple[int, list[int]]:
        node, matched = self._walk(list(ids))
        values = []
        while node is not self.root:
            values = node.value + values
            node = node.parent
        return matched, values

    def insert(self, ids: list[int], values: list[int]) -> int:
        if len(ids) != len(values):
            raise ValueError(f"ids 有 {len(ids)} 个，values 有 {len(values)} 个")
        n = len(ids) - len(ids) % self.page_size
        ids, values = list(ids[:n]), list(values[:n])  # 拷贝：调用者以后改自己的列表，树不受影响
        node, matched = self._walk(ids)
        if matched < n:
            child = Node(ids[matched:], values[matched:], node)
            node.children[self._first_page(child.key)] = child
        return matched
