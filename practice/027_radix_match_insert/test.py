"""练习 027 的评测：随机的 match / insert 序列，每一步的返回值和整棵树的形状都和一个独立写的参考比较。

参考不建树：它记着"哪些整页前缀已经缓存（和它们最后一页的槽位）"，以及"哪些前缀是某个节点的结尾"。
树的形状由这两样唯一确定：每个节点从它最近的、更短的结尾开始，到自己的结尾为止。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (
    call_kept,
    in_child,
    item_kept,
    seed,
    check,
    check_equal,
    check_int_list,
    check_raises,
    check_type,
    main,
    require,
    short,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


class Reference:
    def __init__(self, page_size: int) -> None:
        self.ps = page_size
        self.pages: dict[tuple[int, ...], list[int]] = {}  # 整页前缀 -> 它最后一页的槽位
        self.ends: set[tuple[int, ...]] = set()  # 节点的结尾（从根算起的整段前缀）

    def _matched(self, ids: list[int]) -> int:
        n = 0
        while n + self.ps <= len(ids) and tuple(ids[: n + self.ps]) in self.pages:
            n += self.ps
        return n

    def _stop_at(self, prefix: tuple[int, ...]) -> None:
        if prefix:  # 停在节点中间：那里多了一个节点结尾（切分）
            self.ends.add(prefix)

    def match(self, ids: list[int]) -> tuple[int, list[int]]:
        n = self._matched(ids)
        self._stop_at(tuple(ids[:n]))
        values = [v for end in range(self.ps, n + 1, self.ps) for v in self.pages[tuple(ids[:end])]]
        return n, values

    def insert(self, ids: list[int], values: list[int]) -> int:
        n = len(ids) - len(ids) % self.ps
        matched = self._matched(ids[:n])
        self._stop_at(tuple(ids[:matched]))
        for end in range(matched + self.ps, n + 1, self.ps):
            self.pages[tuple(ids[:end])] = list(values[end - self.ps : end])
        if matched < n:
            self.ends.add(tuple(ids[:n]))
        return matched

    def shape(self) -> dict[tuple[int, ...], tuple[list[int], list[int]]]:
        """节点结尾 -> (这个节点的 key, value)。"""
        out = {}
        for end in self.ends:
            start = max((len(e) for e in self.ends if len(e) < len(end) and end[: len(e)] == e), default=0)
            key = list(end[start:])
            value = [v for e in range(start + self.ps, len(end) + 1, self.ps) for v in self.pages[end[:e]]]
            out[end] = (key, value)
        return out


def tree_shape(tree, context: str) -> dict[tuple[int, ...], tuple[list[int], list[int]]]:
    """学习者的树 -> 节点结尾 -> (key, value)，顺便检查孩子表、parent 和页对齐。"""
    ps = tree.page_size
    out = {}
    stack = [(tree.root, ())]
    while stack:
        node, prefix = stack.pop()
        check_type(node.children, dict, f"{context}：节点的 children")
        for first, child in node.children.items():
            check_int_list(child.key, f"{context}：节点 {short(list(prefix))} 下一个孩子的 key")
            check_int_list(child.value, f"{context}：节点 {short(list(prefix))} 下一个孩子的 value")
            where = f"{context}：前缀 {short(list(prefix))} 下 key={short(child.key)} 的节点"
            check(len(child.key) == len(child.value), f"{where} 的 key 和 value 不一样长")
            check(len(child.key) > 0 and len(child.key) % ps == 0,
                  f"{where} 长度 {len(child.key)} 不是 page_size={ps} 的正整数倍：只存整页")
            check(first == tuple(child.key[:ps]),
                  f"{where} 在孩子表里的键是 {short(first)}，应该是它 key 的第一页 {tuple(child.key[:ps])}")
            check(child.parent is node, f"{where} 的 parent 不是它所在孩子表的主人")
            end = prefix + tuple(child.key)
            out[end] = (list(child.key), list(child.value))
            NODES[end] = (child, tuple(child.key))
            stack.append((child, end))
    return out


NODES: dict = {}  # 最近一次看到的树：节点结尾 -> (节点对象, key)


def check_nodes_persist(before: dict, context: str) -> None:
    """树是一棵一直在那里的树，不是每次现拼出来的：结尾和 key 都没变的节点，还得是同一个对象。
    （把提示存成一张平的表、每次访问 root 时重新拼一棵树，形状对也过不去。）"""
    for end, (node, key) in before.items():
        now = NODES.get(end)
        if now is not None and now[1] == key:
            check(now[0] is node, f"{context}\n  在前缀 {short(list(end))} 处结束的节点（key={short(list(key))}）"
                                  "没有变，却换成了另一个对象：树要在 insert / match 之间一直存在，"
                                  "只在切分的地方新建节点")


def compare_shape(tree, ref: Reference, context: str) -> None:
    got, want = tree_shape(tree, context), ref.shape()
    if got == want:
        return
    extra = sorted(set(got) - set(want), key=len)
    missing = sorted(set(want) - set(got), key=len)
    if missing:
        end = missing[0]
        check(False, f"{context}\n  树里应该有一个节点在前缀 {short(list(end))} 处结束"
                     f"（key={short(want[end][0])}），你的树里没有。"
                     "匹配或插入停在一个节点中间时，要把那个节点切成两段")
    if extra:
        end = extra[0]
        check(False, f"{context}\n  你的树里有一个在前缀 {short(list(end))} 处结束的节点"
                     f"（key={short(got[end][0])}），参考的树里没有：没有分岔、也没有停在那里，就不该切开")
    for end in want:
        check_equal(got[end], want[end], f"在前缀 {short(list(end))} 处结束的节点的 (key, value)", context)


def check_example(RadixTree) -> None:
    tree = RadixTree(2)
    check_equal(tree.insert([1, 2, 3, 4, 5], [10, 11, 12, 13, 99]), 0, "RadixTree(2).insert([1,2,3,4,5], ...)")
    got = tree.match([1, 2, 3, 9])
    check(isinstance(got, tuple) and len(got) == 2, f"match 应该返回 (长度, 槽位列表)，你返回的是 {short(got)}")
    check_equal(got, (2, [10, 11]), "插入 [1,2,3,4,5] 之后 match([1,2,3,9])（page_size=2）")
    check_equal(sorted(tree.root.children), [(1, 2)], "这时根的孩子表的键")
    head = tree.root.children[(1, 2)]
    check_equal((head.key, sorted(head.children)), ([1, 2], [(3, 4)]),
                "match 停在 [1,2,3,4] 这个节点中间之后（要把它切成两段），前半段节点的 (key, 孩子表的键)")
    check_equal(tree.insert([1, 2, 3, 5], [0, 0, 20, 21]), 2, "再 insert([1,2,3,5], ...) 的返回值")
    check_equal(tree.match([1, 2, 3, 5, 7]), (4, [10, 11, 20, 21]), "之后 match([1,2,3,5,7])")


def check_copies(RadixTree) -> None:
    tree = RadixTree(1)
    # 列表放在你的代码的进程里（跨进程传的参数本来都是拷贝），这样改它才看得出树是不是和调用者共用它
    ids, values = in_child(RadixTree, [4, 5, 6]), in_child(RadixTree, [40, 50, 60])
    tree.insert(ids, values)
    ids[1], values[1] = 99, 99  # 调用者改了自己的列表（就像页表的一行换了主人）
    check_equal(tree.match([4, 5, 6]), (3, [40, 50, 60]),
                "insert 之后调用者改了自己传进去的列表，再 match([4,5,6])：树要存自己的拷贝")
    slots = item_kept(call_kept(tree.match, [4, 5, 6]), 1)  # 留在你的进程里的那个列表
    slots[0] = 77  # 调用者改了 match 交给它的列表（比如把它写进页表、再改）
    check_equal(tree.match([4, 5, 6]), (3, [40, 50, 60]),
                "调用者改了 match 返回的槽位列表之后，再 match([4,5,6])：match 要交出新的列表，不是节点自己的 value")
    check_raises(ValueError, tree.insert, [1, 2], [3], what="insert([1, 2], [3])（长度不一样）")


BASES = [[0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2], [0, 1, 2, 2, 2, 2, 1, 1, 0, 0, 1, 1], [1] * 12, [2, 1] * 6]


def random_run(RadixTree, rng: random.Random) -> None:
    ps = rng.choice([1, 1, 2, 3, 4])
    tree, ref = RadixTree(ps), Reference(ps)
    NODES.clear()
    next_slot = 1000
    log: list[str] = []
    for _ in range(rng.randint(1, 40)):
        ids = rng.choice(BASES)[: rng.randint(0, 12)] + [rng.randrange(3) for _ in range(rng.randint(0, 4))]
        if rng.random() < 0.5:
            values = list(range(next_slot, next_slot + len(ids)))
            next_slot += len(ids)
            log.append(f"insert({ids}, …)")
            context = f"RadixTree({ps}) 依次执行 " + "; ".join(log[-6:])
            got = tree.insert(list(ids), list(values))
            check_type(got, int, f"{context} 的返回值")
            check_equal(got, ref.insert(ids, values), "insert 返回的“插入前已经缓存的长度”", context)
        else:
            log.append(f"match({ids})")
            context = f"RadixTree({ps}) 依次执行 " + "; ".join(log[-6:])
            got = tree.match(list(ids))
            check(isinstance(got, tuple) and len(got) == 2, f"{context}：match 应该返回 (长度, 槽位列表)，你返回的是 {short(got)}")
            check_type(got[0], int, f"{context} 返回的长度")
            check_int_list(got[1], f"{context} 返回的槽位")
            check_equal(got, ref.match(ids), "match 的返回值 (长度, 槽位)", context)
        before = dict(NODES)
        NODES.clear()
        compare_shape(tree, ref, context)
        check_nodes_persist(before, context)
    if rng.random() < 0.3:  # 最后在这棵树上插一次长度不一样的：values 多了或少了，差得多或者只差在不满一页的尾巴上
        ids = rng.choice(BASES)[: rng.randint(0, 12)] + [rng.randrange(3) for _ in range(rng.randint(0, 4))]
        whole = len(ids) - len(ids) % ps
        way = rng.choice(["多一个", "少一个", "随便", "尾巴"] if ps > 1 else ["多一个", "少一个", "随便"])
        if way == "多一个" or (way == "少一个" and not ids):
            size = len(ids) + 1
        elif way == "少一个":
            size = len(ids) - 1
        elif way == "尾巴":  # 整页部分一样长，只有尾巴的长度不同：按页截断以后再比长度就查不出来
            size = rng.choice([k for k in range(whole, whole + ps) if k != len(ids)])
        else:
            size = rng.choice([k for k in range(0, len(ids) + 2 * ps + 3) if k != len(ids)])
        values = list(range(next_slot, next_slot + size))
        check_raises(ValueError, tree.insert, list(ids), values,
                     what=f"RadixTree({ps}) 依次执行 " + "; ".join(log[-5:])
                          + f"; insert(ids={ids}, values 共 {size} 个)（ids 有 {len(ids)} 个，长度不一样）")


def run(mod: object) -> None:
    RadixTree = require(mod, "RadixTree")
    check_example(RadixTree)
    check_copies(RadixTree)
    rng = random.Random(SEED)
    for _ in range(100):  # 每次评测的种子都不同；每次调用都跨一次进程
        random_run(RadixTree, rng)


if __name__ == "__main__":
    main(run)
