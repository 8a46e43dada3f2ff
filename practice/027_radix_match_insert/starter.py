"""练习 027 · 按整页匹配和插入的 radix 树（第 9 章 Radix Cache）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

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

    def match(self, ids: list[int]) -> tuple[int, list[int]]:
        """最长的、按整页对齐的已缓存前缀：返回 (长度, 这些 token 的槽位)。

        匹配停在某个节点中间时，把那个节点切成两段（前半段正好是匹配到的部分）。
        """
        raise NotImplementedError

    def insert(self, ids: list[int], values: list[int]) -> int:
        """插入 ids 按页向下取整的部分（槽位是 values 的对应部分），返回插入前已经缓存的长度。"""
        raise NotImplementedError
