"""Radix 前缀缓存：把算过的提示按 token 前缀挂在一棵树上，后来的请求命中多长就少算多长。

树的每个节点存一段 token（key）和这些 token 的 K/V 所在的槽位（value），从根走到某个节点，
沿路的 key 拼起来就是一段缓存过的前缀，value 拼起来就是这段前缀每个 token 的槽位。
所有长度都按 token 计，而且都是页大小的整数倍：一页是 KV 池分配的最小单位，半页没法共享。

几条规矩（check_integrity 逐条检查）：

- 同一个父节点下，孩子们第一页的 token 两两不同，孩子按第一页查找；
- 锁计数 ref_count = 有几个被锁住的句柄经过这个节点；ref_count 为 0 的节点可以被逐出，
  它的长度记在 evictable_size 里，否则记在 protected_size 里；
- 只逐出叶子：中间节点被逐出，它下面的前缀就断了。

key 的比较在 CPU 上用 Python 列表做；value 是 CPU 上的 int32 张量（记账都在 CPU 上，和
PageAllocator 一样），树里存的是自己的拷贝。
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from itertools import count

import torch

from .base import BaseCacheHandle, BasePrefixCache, InsertResult, MatchResult, SizeInfo


class RadixTreeNode:
    """树上的一个节点：一段 token（key）和它们的槽位（value），长度相同、是页大小的整数倍。"""

    _serial = count()  # 给每个节点一个编号：时间戳相同时按编号排，逐出顺序因此是确定的

    def __init__(self, key: list[int], value: torch.Tensor, parent: RadixTreeNode | None,
                 last_access: int) -> None:
        assert len(key) == len(value)
        self.key = key
        self.value = value
        self.parent = parent
        self.children: dict[tuple[int, ...], RadixTreeNode] = {}
        self.ref_count = 0
        self.last_access = last_access  # 最近一次被 match/insert 走过的时刻（逻辑时钟）
        self.id = next(RadixTreeNode._serial)

    @property
    def length(self) -> int:
        return len(self.key)

    def is_root(self) -> bool:
        return self.parent is None

    def is_leaf(self) -> bool:
        return not self.children

    def __repr__(self) -> str:
        return f"RadixTreeNode(id={self.id}, len={self.length}, ref={self.ref_count})"


@dataclass(frozen=True)
class RadixCacheHandle(BaseCacheHandle):
    """一次命中（或插入）的结果：从根到 node 的路径，共 cached_len 个 token。"""

    node: RadixTreeNode

    def get_matched_indices(self) -> torch.Tensor:
        """从根到 node 沿路的槽位拼起来。只有锁住的句柄才保证这些槽位还没被逐出。"""
        parts, node = [], self.node
        while not node.is_root():
            parts.append(node.value)
            node = node.parent
        parts.reverse()
        return torch.cat(parts) if parts else self.node.value  # 根的 value 是空张量


def _common_prefix_len(a: list[int], b: list[int]) -> int:
    """a 和 b 从头开始有几个 token 相同。"""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class RadixPrefixCache(BasePrefixCache):
    """按 token 前缀共享槽位的 radix 树。页大小由构造函数给定（不读全局 Context）。"""

    def __init__(self, page_size: int) -> None:
        if not (isinstance(page_size, int) and page_size >= 1):
            raise ValueError(f"page_size 必须是 ≥ 1 的整数，收到 {page_size!r}")
        self.page_size = page_size
        self.root = RadixTreeNode([], torch.empty(0, dtype=torch.int32), None, last_access=0)
        self.evictable_size = 0  # ref_count == 0 的节点的 token 数之和
        self.protected_size = 0  # ref_count > 0 的节点的 token 数之和
        self._clock = 0  # 逻辑时钟：每次 match/insert 加一，比墙上时间好测、不会相等

    # ------------------------------------------------------------------ 查找与插入

    def match_prefix(self, input_ids: torch.Tensor) -> MatchResult:
        """input_ids 最长的、按整页对齐的已缓存前缀。会切分节点、刷新时间戳，不改大小。"""
        node, matched = self._walk(input_ids.tolist())
        return MatchResult(RadixCacheHandle(matched, node))

    def insert_prefix(self, input_ids: torch.Tensor, indices: torch.Tensor) -> InsertResult:
        """把 input_ids 按页向下取整的部分插进树，槽位是 indices 的对应部分。

        返回 InsertResult(cached_len, handle)：cached_len 是插入前已经在树里的长度（调用者
        那一段的槽位是重复的，应当还掉），handle 指向插入后的整段前缀。
        """
        assert len(input_ids) == len(indices), "token 和槽位必须一一对应"
        insert_len = len(input_ids) - len(input_ids) % self.page_size
        ids = input_ids[:insert_len].tolist()
        node, matched = self._walk(ids)
        if matched < insert_len:
            # clone：indices 往往是页表某一行的切片，那一行以后会被别的请求覆盖
            value = indices[matched:insert_len].to("cpu", torch.int32).clone()
            node = self._add_child(node, ids[matched:], value)
            self.evictable_size += node.length
        return InsertResult(matched, RadixCacheHandle(insert_len, node))

    # ------------------------------------------------------------------ 锁

    def lock_handle(self, handle: BaseCacheHandle, unlock: bool = False) -> None:
        """锁住（或解锁）从 handle.node 到根的每个节点——包括 handle.node 自己。

        锁不改树的形状，只把长度在 evictable 和 protected 之间挪：锁计数从 0 变 1 的节点
        不能再被逐出，从 1 变 0 的节点重新可以被逐出。
        """
        assert isinstance(handle, RadixCacheHandle)
        node = handle.node
        while not node.is_root():
            if unlock:
                assert node.ref_count > 0, f"{node!r} 没被锁住，却要解锁"
                node.ref_count -= 1
                if node.ref_count == 0:
                    self.protected_size -= node.length
                    self.evictable_size += node.length
            else:
                if node.ref_count == 0:
                    self.evictable_size -= node.length
                    self.protected_size += node.length
                node.ref_count += 1
            node = node.parent

    # ------------------------------------------------------------------ 逐出

    def evict(self, size: int) -> torch.Tensor:
        """逐出至少 size 个 token（最久没用的、没被锁住的叶子先走），返回它们的槽位。

        size 按 token 计，不是按页；返回的槽位数是整页，可能比 size 多（叶子整个逐出）。
        """
        if size <= 0:
            return self.root.value
        if size > self.evictable_size:
            raise RuntimeError(
                f"要逐出 {size} 个 token，但只有 {self.evictable_size} 个可以逐出"
                f"（另有 {self.protected_size} 个被锁住）"
            )
        heap = [(n.last_access, n.id, n) for n in self._nodes() if n.is_leaf() and n.ref_count == 0]
        heapq.heapify(heap)
        evicted: list[torch.Tensor] = []
        evicted_size = 0
        while evicted_size < size:
            assert heap, "evictable_size 与树不符"
            _, _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            del parent.children[self._child_key(leaf.key)]
            evicted.append(leaf.value)
            evicted_size += leaf.length
            self.evictable_size -= leaf.length
            # 父节点的最后一个孩子走了，它自己成了叶子，也排进来
            if not parent.is_root() and parent.is_leaf() and parent.ref_count == 0:
                heapq.heappush(heap, (parent.last_access, parent.id, parent))
        return torch.cat(evicted)

    @property
    def size_info(self) -> SizeInfo:
        return SizeInfo(evictable_size=self.evictable_size, protected_size=self.protected_size)

    # ------------------------------------------------------------------ 自检

    def check_integrity(self) -> None:
        """把整棵树重新数一遍，和记账对照；任何一条不符都抛 RuntimeError。"""
        ps = self.page_size
        evictable = protected = 0
        seen_slots: set[int] = set()
        for node in self._nodes():
            where = f"节点 {node.id}（长度 {node.length}）"
            if node.length == 0 or node.length % ps != 0:
                _fail(f"{where}的长度不是页大小 {ps} 的正整数倍")
            if len(node.value) != node.length or node.value.dtype != torch.int32:
                _fail(f"{where}的槽位有 {len(node.value)} 个、类型 {node.value.dtype}，应为 {node.length} 个 int32")
            parent = node.parent
            if parent.children.get(self._child_key(node.key)) is not node:
                _fail(f"{where}不在父节点 {parent.id} 的孩子表里，或者表里的键不是它的第一页")
            slots = node.value.tolist()
            for i in range(0, node.length, ps):  # 每页的槽位：从页边界开始、连续 ps 个
                page = slots[i:i + ps]
                if page[0] % ps != 0 or page != list(range(page[0], page[0] + ps)):
                    _fail(f"{where}第 {i // ps} 页的槽位 {page} 不是一整页")
            own = set(slots)
            if len(own) != len(slots) or seen_slots & own:  # 节点里自己重复，或者和别的节点重复
                twice = sorted(seen_slots & own) or sorted({s for s in slots if slots.count(s) > 1})
                _fail(f"{where}的槽位在树里出现了两次：{twice[:8]}")
            seen_slots |= own
            if node.ref_count < 0:
                _fail(f"{where}的锁计数是负数：{node.ref_count}")
            # 锁住一个句柄，路径上每个节点都 +1，所以父节点的计数不少于孩子们的计数之和
            below = sum(c.ref_count for c in node.children.values())
            if node.ref_count < below:
                _fail(f"{where}的锁计数 {node.ref_count} 小于孩子们的计数之和 {below}")
            if node.ref_count == 0:
                evictable += node.length
            else:
                protected += node.length
        if (evictable, protected) != (self.evictable_size, self.protected_size):
            _fail(
                f"记账不符：树里数出可逐出 {evictable}、受保护 {protected} 个 token，"
                f"记录是 {self.evictable_size} 和 {self.protected_size}"
            )

    # ------------------------------------------------------------------ 内部

    def _child_key(self, key: list[int]) -> tuple[int, ...]:
        """孩子表的键：key 的第一页。"""
        return tuple(key[: self.page_size])

    def _add_child(self, parent: RadixTreeNode, key: list[int], value: torch.Tensor) -> RadixTreeNode:
        child = RadixTreeNode(key, value, parent, last_access=self._clock)
        parent.children[self._child_key(key)] = child
        return child

    def _walk(self, ids: list[int]) -> tuple[RadixTreeNode, int]:
        """从根往下走，尽量多地按整页匹配 ids；停在节点中间时把节点切成两段。

        返回 (最后一个匹配的节点, 匹配的 token 数)。沿路节点的时间戳都刷新成这一次。
        """
        self._clock += 1
        node, matched = self.root, 0
        while matched < len(ids):
            child = node.children.get(self._child_key(ids[matched:]))
            if child is None:  # 剩下不足一页，或者没有孩子以这一页开头
                break
            n = _common_prefix_len(child.key, ids[matched:])
            n -= n % self.page_size  # 第一页一定相同（孩子按第一页查找），所以 n ≥ 一页
            partial = n < child.length
            if partial:  # 停在节点中间：切开，前半段就是命中的部分
                child = self._split(child, n)
            child.last_access = self._clock
            node, matched = child, matched + n
            if partial:
                break
        return node, matched

    def _split(self, node: RadixTreeNode, n: int) -> RadixTreeNode:
        """把 node 切成 [前 n 个 token] → [其余]，返回新的前半段。

        原来的 node 对象留作后半段：指向它的句柄仍然代表整条路径。前半段的锁计数和后半段
        相同（经过后半段的锁都经过前半段），所以 evictable/protected 的大小都不变。
        """
        assert 0 < n < node.length and n % self.page_size == 0
        parent = node.parent
        head = RadixTreeNode(node.key[:n], node.value[:n], parent, node.last_access)
        head.ref_count = node.ref_count
        parent.children[self._child_key(head.key)] = head
        node.key, node.value = node.key[n:], node.value[n:]
        node.parent = head
        head.children[self._child_key(node.key)] = node
        return head

    def _nodes(self) -> list[RadixTreeNode]:
        """除根以外的所有节点（先序）。"""
        out, stack = [], list(self.root.children.values())
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(node.children.values())
        return out

    def format_tree(self) -> str:
        """把树画成几行文字，给页面和调试用。"""
        lines = ["根"]

        def visit(node: RadixTreeNode, indent: str) -> None:
            kids = sorted(node.children.values(), key=lambda c: c.key)
            for i, child in enumerate(kids):
                last = i == len(kids) - 1
                lines.append(
                    f"{indent}{'└─' if last else '├─'} {child.key} 槽位 {child.value.tolist()} "
                    f"ref={child.ref_count} t={child.last_access}"
                )
                visit(child, indent + ("   " if last else "│  "))

        visit(self.root, "")
        return "\n".join(lines)


def _fail(message: str) -> None:
    raise RuntimeError(f"radix 缓存自检失败：{message}")
