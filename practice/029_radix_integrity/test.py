"""练习 029 的评测：随机造出合法的树（插入、切分、加锁、逐出之后），自检必须安静地通过；
再对树做十五种破坏（破坏在哪个节点、哪一页、差多少都随机），每一种都必须抛 ValueError；
自检不许改动合法的树。

造树用的是这里自己的一份小实现（节点只要有 key / value / parent / children / ref_count 这几个属性）。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import copy
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_raises, main, require, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


class TNode:
    def __init__(self, key, value, parent) -> None:
        self.key, self.value, self.parent = key, value, parent
        self.children: dict[tuple[int, ...], TNode] = {}
        self.ref_count = 0


class TCache:
    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.root = TNode([], [], None)
        self.evictable_size = 0
        self.protected_size = 0

    def walk(self, ids):
        ps, node, matched = self.page_size, self.root, 0
        while matched < len(ids):
            child = node.children.get(tuple(ids[matched : matched + ps]))
            if child is None:
                break
            n = 0
            while n < min(len(child.key), len(ids) - matched) and child.key[n] == ids[matched + n]:
                n += 1
            n -= n % ps
            if n < len(child.key):  # 切开
                head = TNode(child.key[:n], child.value[:n], node)
                head.ref_count = child.ref_count
                node.children[tuple(head.key[:ps])] = head
                child.key, child.value, child.parent = child.key[n:], child.value[n:], head
                head.children[tuple(child.key[:ps])] = child
                return head, matched + n
            node, matched = child, matched + n
        return node, matched

    def insert(self, ids, values):
        n = len(ids) - len(ids) % self.page_size
        node, matched = self.walk(ids[:n])
        if matched < n:
            child = TNode(ids[matched:n], values[matched:n], node)
            node.children[tuple(child.key[: self.page_size])] = child
            self.evictable_size += len(child.key)
            node = child
        return node

    def lock(self, node) -> None:
        while node is not self.root:
            if node.ref_count == 0:
                self.evictable_size -= len(node.key)
                self.protected_size += len(node.key)
            node.ref_count += 1
            node = node.parent

    def nodes(self):
        out, stack = [], list(self.root.children.values())
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(node.children.values())
        return out

    def evict_one(self, rng) -> None:
        leaves = [n for n in self.nodes() if not n.children and n.ref_count == 0]
        if leaves:
            leaf = rng.choice(leaves)
            del leaf.parent.children[tuple(leaf.key[: self.page_size])]
            self.evictable_size -= len(leaf.key)


def random_tree(rng: random.Random) -> TCache:
    ps = rng.choice([1, 2, 3, 4])
    cache, next_page = TCache(ps), rng.randrange(50)
    bases = [[rng.randrange(3) for _ in range(12)] for _ in range(3)]
    for _ in range(rng.randint(1, 12)):
        ids = rng.choice(bases)[: rng.randint(0, 12)] + [rng.randrange(3) for _ in range(rng.randint(0, 3))]
        pages = len(ids) // ps + 1
        values = [p * ps + j for p in range(next_page, next_page + pages) for j in range(ps)][: len(ids)]
        next_page += pages + rng.randrange(3)
        action = rng.random()
        if action < 0.6:
            node = cache.insert(ids, values)
            if rng.random() < 0.4:
                cache.lock(node)
        elif action < 0.85:
            node, _ = cache.walk(ids)
            if rng.random() < 0.5:
                cache.lock(node)
        else:
            cache.evict_one(rng)
    return cache


def describe(cache: TCache) -> str:
    lines = [f"page_size={cache.page_size}，evictable_size={cache.evictable_size}，protected_size={cache.protected_size}"]

    def visit(node, indent):
        for child in node.children.values():
            lines.append(f"{indent}key={child.key} value={child.value} ref_count={child.ref_count}")
            visit(child, indent + "  ")

    visit(cache.root, "  ")
    return "\n".join(lines[:14]) + ("\n  …" if len(lines) > 14 else "")


# 十五种破坏：(说明, 函数)。函数改坏 cache 并返回 True；这棵树不适合这种破坏时返回 False。
# 破坏在哪个节点、哪一页、哪个槽位、差多少，都从评测的随机数里抽：只查第一页、只查某一个固定的值都过不去。
def _pick(cache, rng, want):
    nodes = [n for n in cache.nodes() if want(n)]
    return rng.choice(nodes) if nodes else None


def _page(node, ps, rng) -> int:
    """node 里随机一页的起点下标。"""
    return ps * rng.randrange(len(node.value) // ps)


def _off_by(rng, cache, name: str) -> int:
    """记账差多少：多记或者少记，一个 token、一页或者更多（不会记成负数）。"""
    amount = rng.choice([1, cache.page_size, rng.randint(1, 3 * cache.page_size)])
    return amount if rng.random() < 0.5 or getattr(cache, name) < amount else -amount


def bump_evictable(cache, rng):
    cache.evictable_size += _off_by(rng, cache, "evictable_size")
    return True


def bump_protected(cache, rng):
    cache.protected_size += _off_by(rng, cache, "protected_size")
    return True


def child_locked_more(cache, rng):
    node = _pick(cache, rng, lambda n: n.parent is not cache.root and n.ref_count == n.parent.ref_count)
    if node is None:
        return False
    if node.ref_count == 0:  # 两个总数跟着改对：只违反"父节点 ≥ 孩子们之和"这一条
        cache.evictable_size -= len(node.key)
        cache.protected_size += len(node.key)
    node.ref_count += 1
    return True


def parent_below_sum(cache, rng):
    """父节点的计数比孩子们的计数之和少（最好还不少于最大的那个孩子：只比最大值的代码查不出来）。"""
    def total(n):
        return sum(c.ref_count for c in n.children.values())

    node = _pick(cache, rng, lambda n: total(n) > 1 and total(n) - 1 >= max(c.ref_count for c in n.children.values()))
    node = node or _pick(cache, rng, lambda n: total(n) > 0)
    if node is None:
        return False
    new = total(node) - rng.choice([1, 1, rng.randint(1, total(node))])
    if node.ref_count > 0 and new == 0:  # 两个总数跟着改对
        cache.protected_size -= len(node.key)
        cache.evictable_size += len(node.key)
    node.ref_count = new
    return True


def negative_ref(cache, rng):
    node = _pick(cache, rng, lambda n: not n.children and n.ref_count == 0)
    if node is None:
        return False
    node.ref_count = rng.choice([-1, -1, -rng.randint(2, 9)])
    # 两个总数跟着改对（负数不是 0，算“其余”）：只违反“ref_count ≥ 0”这一条
    cache.evictable_size -= len(node.key)
    cache.protected_size += len(node.key)
    return True


def value_length(cache, rng):
    """value 少了或者多了：少一个槽位、少整页，或者多出一整页（新的页，不和别的撞）。"""
    node = _pick(cache, rng, lambda n: True)
    if node is None:
        return False
    ps = cache.page_size
    way = rng.choice(["少一个", "少整页", "多一页"])
    if way == "少一个":
        node.value = node.value[:-1]
    elif way == "少整页":
        node.value = node.value[: -ps * rng.randint(1, len(node.value) // ps)]
    else:
        start = ps * (FAR + rng.randrange(1000))
        node.value = node.value + list(range(start, start + ps))
    return True


def half_page(cache, rng):
    node = _pick(cache, rng, lambda n: not n.children and cache.page_size > 1)
    if node is None:
        return False
    cut = rng.randint(1, cache.page_size - 1)  # 最后一页只剩一部分
    node.key, node.value = node.key[:-cut], node.value[:-cut]
    if node.ref_count:
        cache.protected_size -= cut
    else:
        cache.evictable_size -= cut
    return True


def wrong_child_key(cache, rng):
    """孩子表里的键和孩子的第一页差一个 token（在第一页里随机的位置）。"""
    node = _pick(cache, rng, lambda n: True)
    if node is None:
        return False
    parent = node.parent
    first = tuple(node.key[: cache.page_size])
    j = rng.randrange(len(first))
    bad = first[:j] + (first[j] + rng.randint(7, 9),) + first[j + 1:]  # 树里的 token 都是 0、1、2
    del parent.children[first]
    parent.children[bad] = node
    return True


def wrong_parent(cache, rng):
    """parent 指向了别的节点：根，或者树里另一个节点。"""
    node = _pick(cache, rng, lambda n: True)
    if node is None:
        return False
    others = [n for n in [cache.root] + cache.nodes() if n is not node.parent and n is not node]
    if not others:
        return False
    node.parent = rng.choice(others)
    return True


def duplicate_slot(cache, rng):
    """b 的随机一页换成了 a 的随机一页。"""
    nodes = cache.nodes()
    if len(nodes) < 2:
        return False
    a, b = rng.sample(nodes, 2)
    ps = cache.page_size
    i, j = _page(a, ps, rng), _page(b, ps, rng)
    b.value = b.value[:j] + a.value[i : i + ps] + b.value[j + ps :]
    return True


def empty_node(cache, rng):
    node = _pick(cache, rng, lambda n: True)
    if node is None:
        return False
    node.children[()] = TNode([], [], node)
    return True


def page_not_contiguous(cache, rng):
    """随机一页里的槽位换了顺序。"""
    node = _pick(cache, rng, lambda n: cache.page_size > 1)
    if node is None:
        return False
    ps = cache.page_size
    i = _page(node, ps, rng)
    page = node.value[i : i + ps]
    shuffled = page[:]
    while shuffled == page:
        rng.shuffle(shuffled)
    node.value = node.value[:i] + shuffled + node.value[i + ps :]
    return True


# 下面三种各只违反一条：槽位不会和树里别的槽位撞上（用远大于树里槽位的数）
FAR = 10**6


def page_gap(cache, rng):
    """随机一页从页边界开始，页里随机一个槽位却跳走了：只违反“连续”。"""
    node = _pick(cache, rng, lambda n: cache.page_size > 1)
    if node is None:
        return False
    ps = cache.page_size
    i = _page(node, ps, rng)
    j = i + rng.randint(1, ps - 1)
    node.value = node.value[:j] + [node.value[j] + ps * (FAR + rng.randrange(1000))] + node.value[j + 1 :]
    return True


def page_off_boundary(cache, rng):
    """随机一页是连续的 page_size 个槽位，却不从页边界开始：只违反“从页边界开始”。"""
    node = _pick(cache, rng, lambda n: cache.page_size > 1)
    if node is None:
        return False
    ps = cache.page_size
    i = _page(node, ps, rng)
    start = ps * (FAR + rng.randrange(1000)) + rng.randint(1, ps - 1)
    node.value = node.value[:i] + list(range(start, start + ps)) + node.value[i + ps :]
    return True


def duplicate_page_in_node(cache, rng):
    """同一个节点里，随机的两页是同一页。"""
    ps = cache.page_size
    node = _pick(cache, rng, lambda n: len(n.key) >= 2 * ps)
    if node is None:
        return False
    i, j = sorted(rng.sample(range(0, len(node.value), ps), 2))
    if rng.random() < 0.5:
        i, j = j, i
    node.value = node.value[:j] + node.value[i : i + ps] + node.value[j + ps :]
    return True


DAMAGES = [
    ("evictable_size 记错了", bump_evictable),
    ("protected_size 记错了", bump_protected),
    ("孩子的锁计数比父节点多（两个总数已经跟着改对）", child_locked_more),
    ("父节点的锁计数比孩子们的计数之和少（两个总数已经跟着改对）", parent_below_sum),
    ("锁计数是负数", negative_ref),
    ("value 和 key 不一样长", value_length),
    ("一个叶子的最后一页只剩一部分（两个总数已经跟着改对）", half_page),
    ("孩子表里的键不是孩子的第一页", wrong_child_key),
    ("节点的 parent 指错了", wrong_parent),
    ("同一页槽位出现在两个节点里", duplicate_slot),
    ("多了一个长度为 0 的节点", empty_node),
    ("一页里的槽位不是从页边界开始的连续 page_size 个", page_not_contiguous),
    ("一页从页边界开始，后面的槽位却不连续", page_gap),
    ("一页的槽位连续，却不从页边界开始", page_off_boundary),
    ("同一个节点里同一页出现了两次", duplicate_page_in_node),
]


def snapshot(cache) -> tuple:
    """树的全部内容：每个节点的 key、value、ref_count、parent、孩子表（按遍历顺序），外加两个总数。"""
    rows, stack = [], [cache.root]
    while stack:
        node = stack.pop()
        rows.append((id(node), list(node.key), list(node.value), node.ref_count, id(node.parent),
                     [(first, id(child)) for first, child in node.children.items()]))
        stack.extend(node.children.values())
    return cache.evictable_size, cache.protected_size, rows


def sum_not_max(check_integrity) -> None:
    """父节点的计数要不少于孩子们的计数之和（不只是不少于最大的那个）。"""
    cache = TCache(1)
    a = cache.insert([1, 2, 3], [0, 1, 2])
    b = cache.insert([1, 2, 4], [0, 0, 3])
    cache.lock(a)
    cache.lock(b)
    check_integrity(cache)
    head = a.parent
    head.ref_count = 1  # 应该是 2：两个锁都经过它
    check_raises(ValueError, check_integrity, cache,
                 what="[1 2] 下面两个叶子各锁了一次、它自己的 ref_count 却是 1 时 check_integrity(cache)"
                      "（父节点的计数应该不少于孩子们的计数之和）")


def run(mod: object) -> None:
    check_integrity = require(mod, "check_integrity")
    rng = random.Random(SEED)
    trees = [random_tree(rng) for _ in range(200)]
    for cache in trees:
        mine = copy.deepcopy(cache)
        before = snapshot(mine)
        try:
            check_integrity(mine)
        except NotImplementedError:
            raise
        except Exception as e:  # noqa: BLE001
            check(False, f"这棵树是合法的，check_integrity 却抛了 {type(e).__name__}: {e}\n{describe(cache)}")
        check(snapshot(mine) == before,
              f"check_integrity 改动了树（节点、槽位、计数、孩子表或两个总数）：自检只能看，不能改\n{describe(cache)}")
    sum_not_max(check_integrity)
    for what, damage in DAMAGES:
        done = 0
        for cache in trees:
            bad = copy.deepcopy(cache)
            if not damage(bad, rng):
                continue
            check_raises(ValueError, check_integrity, bad,
                         what=f"树被破坏（{what}）之后 check_integrity(cache)\n{describe(bad)}\n ")
            done += 1
            if done == 15:
                break
        check(done > 0, f"（评测自己的问题）没有一棵树能做“{what}”这种破坏")


if __name__ == "__main__":
    main(run)
