"""练习 029 · 给 radix 缓存写一个真正的自检（挑战）——第 9 章 Radix Cache

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


class Node:
    def __init__(self, key: list[int], value: list[int], parent: Node | None) -> None:
        self.key = key  # 这一段 token
        self.value = value  # 这些 token 的槽位
        self.parent = parent
        self.children: dict[tuple[int, ...], Node] = {}  # 孩子 key 的第一页 -> 孩子
        self.ref_count = 0


class Cache:
    """只是装树的容器：根、页大小、两个总数。"""

    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.root = Node([], [], None)
        self.evictable_size = 0
        self.protected_size = 0


def check_integrity(cache: Cache) -> None:
    """把整棵树重新数一遍；任何一条规矩不成立就抛 ValueError（说清楚是哪个节点、哪条规矩）。"""
    raise NotImplementedError
