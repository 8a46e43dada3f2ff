"""练习 026 的评测：随机的请求序列（相同前缀很多、同一批里有相同的提示、缓存偶尔逐出），每一次调用
cache_req 之后检查缓存收到的 insert、每页的持有份数（和独立推出来的账比较）、活着的行指着的页没有
一页是空闲的，以及返回值。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import bad_int, check, check_equal, check_int_list, check_raises, check_type, main, require, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


class Pool:
    """评测用的页池：按持有份数记账；学习者 hold 空闲页或放多了，当场判错。"""

    def __init__(self, num_pages: int) -> None:
        self.refs = [0] * num_pages
        self.calls = 0

    def free(self) -> list[int]:
        return [p for p, r in enumerate(self.refs) if r == 0]

    def alloc(self, n: int) -> list[int]:
        pages = self.free()[:n]
        assert len(pages) == n
        for p in pages:
            self.refs[p] = 1
        return pages

    def hold(self, pages) -> None:
        self.calls += 1
        check_int_list(list(pages), "pool.hold 的参数")
        for p in pages:
            check(0 <= p < len(self.refs) and self.refs[p] > 0,
                  f"pool.hold({list(pages)})：{p} 号页是空闲页，不能加持有")
        for p in pages:
            self.refs[p] += 1

    def release(self, pages) -> None:
        self.calls += 1
        check_int_list(list(pages), "pool.release 的参数")
        for p in pages:
            check(0 <= p < len(self.refs) and self.refs[p] > 0,
                  f"pool.release({list(pages)})：{p} 号页已经没人持有了，放多了")
            self.refs[p] -= 1


class Cache:
    """评测用的前缀缓存：每个整页前缀一条记录，键是到这一页为止的全部 token。"""

    def __init__(self, page_size: int) -> None:
        self.ps = page_size
        self.entries: dict[tuple, int] = {}
        self.inserts: list[tuple[list[int], list[int], int]] = []

    def walk(self, tokens: list[int]) -> list[int]:
        pages, k = [], self.ps
        while k <= len(tokens) and tuple(tokens[:k]) in self.entries:
            pages.append(self.entries[tuple(tokens[:k])])
            k += self.ps
        return pages

    def insert(self, tokens, pages) -> int:
        tokens, pages = list(tokens), list(pages)
        check_int_list(tokens, "cache.insert 的 tokens")
        check_int_list(pages, "cache.insert 的 pages")
        check(len(tokens) == len(pages) * self.ps,
              f"cache.insert 只收整页：{len(pages)} 页应该配 {len(pages) * self.ps} 个 token，"
              f"你给了 {len(tokens)} 个")
        already = len(self.walk(tokens))
        for k in range(already, len(pages)):
            self.entries[tuple(tokens[: (k + 1) * self.ps])] = pages[k]
        self.inserts.append((tokens, pages, already))
        return already

    def leaves(self) -> list[tuple]:
        return [key for key in self.entries
                if not any(len(other) == len(key) + self.ps and other[: len(key)] == key
                           for other in self.entries)]


class World:
    """一个小调度器：接纳（借用命中的页）、prefill、decode、结束、逐出。"""

    def __init__(self, cache_req, rng: random.Random) -> None:
        self.cache_req, self.rng = cache_req, rng
        self.ps = rng.choice([1, 2, 4])
        self.pool, self.cache = Pool(80), Cache(self.ps)
        self.expected = [0] * 80  # 独立推出来的账
        self.rows: dict[int, dict] = {}
        self.next_id, self.log = 0, []

    def where(self) -> str:
        return f"page_size={self.ps}；最近的事件：" + "；".join(self.log[-5:])

    def admit(self, prompt: list[int]) -> dict | None:
        borrowed = self.cache.walk(prompt[:-1])  # 最后一个提示 token 要算
        need = -(-len(prompt) // self.ps) - len(borrowed)
        if need > len(self.pool.free()):
            return None
        new = self.pool.alloc(need)
        for p in borrowed:  # 这一行借用命中的页：加一份
            self.pool.refs[p] += 1
            self.expected[p] += 1
        for p in new:
            self.expected[p] = 1
        row = {"id": self.next_id, "tokens": list(prompt), "pages": borrowed + new,
               "cached": len(prompt)}
        self.next_id += 1
        self.rows[row["id"]] = row
        self.log.append(f"第 {row['id']} 行接纳，提示 {prompt}，借用 {borrowed}，新分 {new}")
        return row

    def call(self, row: dict, finished: bool) -> None:
        ps, n = self.ps, row["cached"] // self.ps
        self.log.append(f"cache_req(第 {row['id']} 行，cached_len={row['cached']}，finished={finished})")
        # tokens 至少 cached_len 个：有时还带着刚采样出来、K/V 还没进池的 token（它们不能交给缓存）
        sampled = [self.rng.randrange(3) for _ in range(self.rng.choice([0, 0, 1, self.rng.randint(1, 2 * ps + 1)]))]
        if sampled:
            self.log[-1] = self.log[-1].replace("cached_len=", f"tokens 比 cached_len 多 {len(sampled)} 个，cached_len=")
        args = (list(row["pages"]), list(row["tokens"]) + sampled)
        before = len(self.cache.inserts)
        got = self.cache_req(self.pool, self.cache, args[0], args[1], row["cached"],
                             page_size=ps, finished=finished)
        check_equal((args[0], args[1]), (row["pages"], row["tokens"] + sampled),
                    "传进去的 row_pages / tokens（不应该被改动）", self.where())
        check_type(got, int, "cache_req 的返回值")
        check_equal(got, n * ps, "cache_req 的返回值（存进缓存的整页 token 数）", self.where())
        check(len(self.cache.inserts) == before + 1,
              f"cache_req 应该调用一次 cache.insert，你调用了 {len(self.cache.inserts) - before} 次\n  {self.where()}")
        tokens, pages, already = self.cache.inserts[-1]
        check_equal((tokens, pages), (row["tokens"][: n * ps], row["pages"][:n]),
                    "cache.insert 收到的 (tokens, pages)：应该是前 cached_len // page_size 个整页",
                    self.where())
        for p in pages[already:]:  # 缓存新收下的页：缓存持有一份
            self.expected[p] += 1
        if finished:
            for p in row["pages"]:
                self.expected[p] -= 1
            del self.rows[row["id"]]
        self.check_books()

    def check_books(self) -> None:
        for row in self.rows.values():
            for p in row["pages"]:
                if self.pool.refs[p] == 0:
                    check(False, f"{p} 号页已经回到空闲页，可第 {row['id']} 行还指着它（它还要接着 decode）"
                                 f"\n  {self.where()}")
        for p, (got, want) in enumerate(zip(self.pool.refs, self.expected)):
            if got != want:
                hint = ""
                if got > want:
                    hint = "\n  多出来的持有：缓存只对它新收下的页加一份，原来就在缓存里的那几页不加"
                check(False, f"{p} 号页应该有 {want} 份持有，现在是 {got}{hint}\n  {self.where()}")

    def decode(self, row: dict) -> None:
        if row["cached"] % self.ps == 0:
            if not self.pool.free():
                return
            page = self.pool.alloc(1)[0]
            self.expected[page] = 1
            row["pages"].append(page)
        row["tokens"].append(self.rng.randrange(3))
        row["cached"] += 1

    def evict(self) -> None:
        leaves = self.cache.leaves()
        if leaves:
            key = self.rng.choice(leaves)
            page = self.cache.entries.pop(key)
            self.pool.refs[page] -= 1  # 缓存放下它那一份（借用这页的行还持有自己那份）
            self.expected[page] -= 1
            self.log.append(f"缓存逐出 {page} 号页")

    def step(self) -> None:
        rng = self.rng
        if len(self.rows) < 5 and rng.random() < 0.5:
            prompt = [rng.randrange(3) for _ in range(rng.randint(1, 10))]
            batch = [self.admit(prompt) for _ in range(rng.choice([1, 1, 2]))]  # 同一批里相同的提示
            for row in batch:
                if row is not None:
                    self.call(row, finished=False)
        for row in list(self.rows.values()):
            if rng.random() < 0.6:
                self.decode(row)
        if self.rows and rng.random() < 0.3:
            self.call(rng.choice(list(self.rows.values())), finished=True)
        if rng.random() < 0.2:
            self.evict()


def check_example(cache_req) -> None:
    pool, cache = Pool(8), Cache(2)
    a, b = pool.alloc(3), pool.alloc(3)  # [0, 1, 2] 和 [3, 4, 5]
    tokens = [1, 2, 3, 4, 5]
    check_equal(cache_req(pool, cache, a, tokens, 5, page_size=2, finished=False), 4,
                "例子：A 的 cache_req(finished=False) 的返回值")
    check_equal(cache_req(pool, cache, b, tokens, 5, page_size=2, finished=False), 4,
                "例子：B 的 cache_req(finished=False) 的返回值")
    check_equal(pool.refs[:6], [2, 2, 1, 1, 1, 1],
                "例子：两次 finished=False 之后 0–5 号页的持有份数（B 的 3、4 页重复，只归 B 的行）")
    cache_req(pool, cache, b, tokens, 5, page_size=2, finished=True)
    check_equal(pool.refs[:6], [2, 2, 1, 0, 0, 0], "例子：B 结束之后 0–5 号页的持有份数")


def check_bad_arguments(cache_req, rng: random.Random) -> None:
    """坏参数：哪一条不满足、超出多少（就在边界上或者远一些）、页大小和行的长度都随机；
    出错时 insert / hold / release 一次都不能调用。"""
    kinds = ["比 token 多", "行放不下", "负数"] * 4
    rng.shuffle(kinds)
    seen = {kind: 0 for kind in kinds}
    for kind in kinds:
        # 超出多少：每种的头两次一次就在边界上（多 1 个）、一次远一些，其余随机
        k, seen[kind] = seen[kind], seen[kind] + 1
        over = [1, rng.randint(6, 50)][k] if k < 2 else rng.choice([1, 1, rng.randint(2, 5)])
        ps = rng.choice([1, 2, 4])
        if kind == "比 token 多":  # 行放得下，只是 token 不够
            length = rng.randint(0, 9)
            cached = length + over
            num_pages = -(-cached // ps) + rng.randint(0, 1)
            why = f"cached_len={cached} 比 token（{length} 个）多"
        elif kind == "行放不下":  # token 够，只是行的页不够
            num_pages = rng.randint(0, 3)
            cached = num_pages * ps + over
            length = cached + rng.randint(0, 3)
            why = f"这一行只有 {num_pages} 页（每页 {ps} 个），放不下 {cached} 个 token"
        else:
            length, num_pages = rng.randint(0, 9), rng.randint(0, 3)
            cached = -over if k < 2 else bad_int(rng, 0)  # -1、远一些的负数，其余随机
            why = f"cached_len={cached} 是负数"
        pool, cache = Pool(num_pages + 4), Cache(ps)
        row = pool.alloc(num_pages)
        tokens = [rng.randrange(3) for _ in range(length)]
        check_raises(ValueError, cache_req, pool, cache, row, tokens, cached,
                     what=f"cache_req(row_pages={row}, tokens={tokens}, cached_len={cached}, page_size={ps})（{why}）",
                     page_size=ps, finished=rng.random() < 0.5)
        check(not cache.inserts and pool.calls == 0,
              f"cache_req(...)（{why}）抛 ValueError 之前就调用了 insert / hold / release：出错时什么都不改")

    # 边界上合法的调用：cached_len = 0（交出 0 页，insert 照样调用一次），cached_len 正好填满这一行
    for i in range(6):
        ps, num_pages = rng.choice([1, 2, 4]), rng.randint(0, 3)
        cached = [0, num_pages * ps][i % 2]
        tokens = [rng.randrange(3) for _ in range(cached + rng.randint(0, 3))]
        pool, cache = Pool(16), Cache(ps)
        row = pool.alloc(num_pages)
        n = cached // ps
        call = f"cache_req(row_pages={row}, tokens={tokens}, cached_len={cached}, page_size={ps}, finished=False)"
        check_equal(cache_req(pool, cache, row, tokens, cached, page_size=ps, finished=False), n * ps,
                    f"{call} 的返回值")
        check_equal([(t, p) for t, p, _ in cache.inserts], [(tokens[: n * ps], row[:n])],
                    f"{call} 对 cache.insert 的调用（一次，只交前 cached_len // page_size 个整页）")
        check_equal(pool.refs[:num_pages], [2] * n + [1] * (num_pages - n), f"{call} 之后这一行各页的持有份数")


def run(mod) -> None:
    cache_req = require(mod, "cache_req")
    check_example(cache_req)
    rng = random.Random(SEED)
    check_bad_arguments(cache_req, rng)
    for _ in range(150):
        world = World(cache_req, rng)
        for _ in range(40):
            world.step()
        for row in list(world.rows.values()):
            world.call(row, finished=True)
        # 全部结束：每一页要么空闲，要么只被缓存持有一份
        cached = sorted(world.cache.entries.values())
        held = sorted(p for p, r in enumerate(world.pool.refs) for _ in range(r))
        check_equal(held, cached, "全部请求结束之后仍被持有的页（应该正好是缓存里的页，各一份）",
                    world.where())


if __name__ == "__main__":
    main(run)
