"""练习 028 的评测：几个写好的场景（锁从句柄自己的节点开始、LRU 顺序、按 token 计数、父节点变成叶子），
再是随机的插入 / 匹配 / 加锁 / 解锁 / 逐出序列，和一个不建树、一页一页记账的参考比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (
    seed,
    check,
    check_equal,
    check_int_list,
    check_raises,
    main,
    require,
    short,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


def sizes(cache) -> tuple[int, int]:
    return cache.evictable_size, cache.protected_size


def slots_of(cache, count_from: int, n: int) -> list[int]:
    return list(range(count_from, count_from + n))


def check_lock_includes_own_node(RadixCache) -> None:
    cache = RadixCache(1)
    _, handle = cache.insert([1, 2, 3], [10, 11, 12])
    cache.lock(handle)
    got = sizes(cache)
    hint = "\n  看起来句柄自己的节点没锁上：锁要从句柄指向的节点开始，一路到根（根不算）" if got == (3, 0) else ""
    check_equal(got, (0, 3), "insert([1,2,3]) 后锁住返回的句柄，(evictable_size, protected_size)", hint)
    check_raises(ValueError, cache.evict, 1, what="全都锁住时 evict(1)")
    cache.lock(handle, unlock=True)
    check_equal(sizes(cache), (3, 0), "再解锁之后 (evictable_size, protected_size)")
    check_raises(ValueError, cache.lock, handle, unlock=True,
                 what="锁一次、解一次之后，还没锁就再解锁：lock(handle, unlock=True)")
    check_equal(sizes(cache), (3, 0), "多解的那一次抛了 ValueError 之后 (evictable_size, protected_size)")
    check_equal(handle.ref_count, 0, "多解的那一次抛了 ValueError 之后句柄节点的 ref_count（出错时什么都不改）")
    _, h1 = cache.match([1, 2])  # 切成 [1 2] → [3]，句柄指向 [1 2]
    cache.lock(h1)
    cache.lock(h1)
    check_equal(sizes(cache), (1, 2), "match([1,2]) 的句柄锁两次，(evictable_size, protected_size)")
    cache.lock(h1, unlock=True)
    check_equal(sizes(cache), (1, 2), "锁两次、解一次之后（锁是计数的），(evictable_size, protected_size)")
    check_equal(cache.evict(1), [12], "这时 evict(1)：只有没锁的 [3] 能走")


def check_lru_and_tokens(RadixCache) -> None:
    cache = RadixCache(1)
    cache.insert([1, 1, 1], [1, 2, 3])
    cache.insert([2, 2, 2], [4, 5, 6])
    cache.insert([3, 3, 3], [7, 8, 9])
    cache.match([1, 1, 1])  # 刷新：现在最久没用的是 [2 2 2]
    check_equal(cache.evict(2), [4, 5, 6],
                "插入 [1,1,1]、[2,2,2]、[3,3,3]，再 match([1,1,1]) 之后 evict(2)（最久没用的整个叶子）")
    check_equal(sizes(cache), (6, 0), "之后 (evictable_size, protected_size)")

    cache = RadixCache(4)
    for first in range(4):
        cache.insert([first, 0, 0, 0], slots_of(cache, 100 + 4 * first, 4))
    got = cache.evict(5)
    check_int_list(got, "evict(5) 的返回值")
    check_equal(len(got), 8, "page_size=4、4 个一页大的叶子时 evict(5) 逐出的槽位数"
                "（size 按 token 计：一页 4 个不够 5 个，要两页）")

    cache = RadixCache(1)
    cache.insert([1, 2], [10, 11])
    cache.insert([1, 2, 3], [0, 0, 12])
    cache.insert([5], [13])
    check_equal(cache.evict(3), [12, 10, 11],
                "树是 [1 2]→[3] 和 [5]（[5] 最新）时 evict(3)：[3] 走了以后 [1 2] 成了叶子，比 [5] 旧，接着走；"
                "槽位按逐出的先后拼起来")
    check_equal(cache.evict(0), [], "evict(0)")
    check_raises(ValueError, cache.evict, 2, what="只剩 1 个 token 时 evict(2)")
    check_equal(sizes(cache), (1, 0), "evict(2) 抛了 ValueError 之后 (evictable_size, protected_size)"
                "（出错时什么都不改：先查 size，再动手）")
    check_equal(cache.evict(1), [13], "evict(2) 失败之后再 evict(1)：[5] 应该还在")


class Reference:
    """一页一页地记：整页前缀 -> 它最后一页的槽位、锁计数、最近访问时刻。"""

    def __init__(self, ps: int) -> None:
        self.ps, self.clock = ps, 0
        self.pages: dict[tuple[int, ...], list[int]] = {}
        self.locks: dict[tuple[int, ...], int] = {}
        self.access: dict[tuple[int, ...], int] = {}

    def prefixes(self, seq):
        return [tuple(seq[:end]) for end in range(self.ps, len(seq) - len(seq) % self.ps + 1, self.ps)]

    def match(self, seq) -> int:
        self.clock += 1
        n = 0
        for p in self.prefixes(seq):
            if p not in self.pages:
                break
            self.access[p], n = self.clock, len(p)
        return n

    def insert(self, seq, values) -> int:
        self.clock += 1
        cached = 0
        for p in self.prefixes(seq):
            if p in self.pages:
                cached = len(p)
            else:
                self.pages[p], self.locks[p] = list(values[len(p) - self.ps : len(p)]), 0
            self.access[p] = self.clock
        return cached

    def lock(self, seq, delta: int) -> None:
        for p in self.prefixes(seq):
            self.locks[p] += delta

    def sizes(self) -> tuple[int, int]:
        locked = sum(1 for p in self.pages if self.locks[p] > 0)
        return (len(self.pages) - locked) * self.ps, locked * self.ps

    def evict_lru(self, size: int):
        """每次拿走最久没访问、没锁住的叶子页（叶子页的访问时刻两两不同）。返回 [(前缀, 时刻)]。"""
        gone = []
        while len(gone) * self.ps < size:
            leaves = [p for p in self.pages if self.locks[p] == 0
                      and not any(len(q) == len(p) + self.ps and q[: len(p)] == p for q in self.pages)]
            victim = min(leaves, key=lambda p: self.access[p])
            gone.append((victim, self.access[victim]))
            self.remove(victim)
        return gone

    def remove(self, p) -> None:
        del self.pages[p], self.locks[p], self.access[p]


def tree_pages(cache) -> dict[tuple[int, ...], list[int]]:
    out, stack = {}, [(cache.root, ())]
    while stack:
        node, prefix = stack.pop()
        for child in node.children.values():
            end = prefix + tuple(child.key)
            for i in range(0, len(child.key), cache.page_size):
                out[prefix + tuple(child.key[: i + cache.page_size])] = child.value[i : i + cache.page_size]
            stack.append((child, end))
    return out


BASES = [[0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2], [0, 1, 2, 2, 2, 2, 1, 1, 0, 0, 1, 1], [1] * 12]


def random_run(RadixCache, rng: random.Random) -> None:
    ps = rng.choice([1, 2, 4])
    cache, ref = RadixCache(ps), Reference(ps)
    locked: list[tuple[object, tuple[int, ...]]] = []
    log: list[str] = []
    next_slot = 0
    for _ in range(rng.randint(1, 40)):
        kind = rng.choice(["insert", "match", "match_lock", "insert_lock", "unlock", "evict", "evict", "over_unlock"])
        seq = rng.choice(BASES)[: rng.randint(0, 12)] + [rng.randrange(3) for _ in range(rng.randint(0, 3))]
        context = lambda: f"RadixCache({ps}) 依次执行 " + "; ".join(log[-6:])
        if kind in ("insert", "insert_lock"):
            values = list(range(next_slot, next_slot + len(seq)))
            next_slot += len(seq)
            _, handle = cache.insert(seq, values)
            ref.insert(seq, values)
            n = len(seq) - len(seq) % ps
            log.append(f"insert({seq})" + ("+lock" if kind == "insert_lock" else ""))
            if kind == "insert_lock":
                cache.lock(handle)
                ref.lock(seq[:n], +1)
                locked.append((handle, tuple(seq[:n])))
        elif kind in ("match", "match_lock"):
            n, handle = cache.match(seq)
            ref.match(seq)
            log.append(f"match({seq})" + ("+lock" if kind == "match_lock" else ""))
            if kind == "match_lock":
                cache.lock(handle)
                ref.lock(seq[:n], +1)
                locked.append((handle, tuple(seq[:n])))
        elif kind == "unlock" and locked:
            handle, prefix = locked.pop(rng.randrange(len(locked)))
            log.append(f"unlock({list(prefix)})")
            cache.lock(handle, unlock=True)
            ref.lock(prefix, -1)
        elif kind == "over_unlock" and any(ref.locks[p] == 0 for p in ref.pages):
            # 多解一次锁：句柄的节点没锁住（它上面的节点可能被别的句柄锁着），出错时什么都不改
            free = [p for p in ref.pages if ref.locks[p] == 0]
            under_lock = [p for p in free if len(p) > ps and ref.locks[p[:-ps]] > 0]
            prefix = rng.choice(under_lock if under_lock and rng.random() < 0.7 else free)
            _, handle = cache.match(list(prefix))
            ref.match(list(prefix))
            above = "，它上面的前缀还被锁着" if len(prefix) > ps and ref.locks[prefix[:-ps]] > 0 else ""
            log.append(f"match({list(prefix)}) 拿到没锁住的句柄")
            check_raises(ValueError, cache.lock, handle, unlock=True,
                         what=f"{context()}\n  然后对这个句柄解锁：lock(handle, unlock=True)"
                              f"（句柄的节点没锁住{above}：还没锁就再解锁）")
            log.append("unlock（ValueError，什么都不改）")
        elif kind == "evict" and rng.random() < 0.15:
            size = ref.sizes()[0] + rng.randint(1, 2 * ps)
            log.append(f"evict({size})")
            check_raises(ValueError, cache.evict, size,
                         what=f"{context()}\n  只有 {ref.sizes()[0]} 个 token 能逐出时 evict({size})")
            log[-1] += "（ValueError，什么都不改）"
        elif kind == "evict":
            size = rng.randint(0, ref.sizes()[0])
            log.append(f"evict({size})")
            got = cache.evict(size)
            check_int_list(got, f"{context()} 里 evict 的返回值")
            check(len(got) >= size, f"{context()}\n  evict({size}) 只逐出了 {len(got)} 个 token：至少要 {size} 个")
            owner = {s: p for p, vals in ref.pages.items() for s in vals}
            for s in got:
                check(s in owner, f"{context()}\n  evict 返回了槽位 {s}：它不在缓存里（或者返回了两次）")
                p = owner.pop(s)
                check(ref.locks[p] == 0, f"{context()}\n  evict 逐出了被锁住的前缀 {short(list(p))}")
            evicted = {p for p, vals in ref.pages.items() for s in vals if s in set(got)}
            lru = ref.evict_lru(size)
            early = [p for p, _ in lru if p not in evicted]
            check(not early, f"{context()}\n  evict({size}) 没按最久没用的顺序：前缀 {short(list(early[0]) if early else [])}"
                             " 比你逐出的更久没被访问，应该先走（每次拿走 last_access 最小的、没锁住的叶子）")
            for p in evicted - {p for p, _ in lru}:  # 叶子整个走，多出来的页和参考最后拿走的那页同属一个节点
                check(ref.access[p] == lru[-1][1],
                      f"{context()}\n  evict({size}) 逐出得太多：前缀 {short(list(p))} 不必走（够 {size} 个 token 就停）")
                ref.remove(p)
        else:
            continue
        check_equal(sizes(cache), ref.sizes(), "(evictable_size, protected_size)", context())
        check_equal(tree_pages(cache), ref.pages, "树里缓存的每一页（前缀 -> 槽位）", context())


def run(mod: object) -> None:
    RadixCache = require(mod, "RadixCache")
    check_lock_includes_own_node(RadixCache)
    check_lru_and_tokens(RadixCache)
    rng = random.Random(SEED)
    for _ in range(40):  # 每次评测的种子都不同：少跑几组，跨进程的调用也少一些
        random_run(RadixCache, rng)


if __name__ == "__main__":
    main(run)
