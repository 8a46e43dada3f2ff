"""练习 024 的评测：随机的 alloc / hold / release 序列，每一步之后把每页的份数、空闲页数和返回值
与独立写的参考模型比较；出错的调用必须抛 ValueError，而且什么都不改。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_int_list, check_raises, check_type, main, require, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


class Model:
    """参考模型：只记每页的份数；空闲 = 份数为 0。"""

    def __init__(self, num_pages: int) -> None:
        self.refs = {p: 0 for p in range(num_pages)}

    def free_pages(self) -> list[int]:
        return [p for p, r in self.refs.items() if r == 0]

    def release(self, pages: list[int]) -> list[int] | None:
        """合法时返回这一次降到 0 的页（并改模型）；不合法时返回 None，模型不变。"""
        want: dict[int, int] = {}
        for p in pages:
            if p not in self.refs:
                return None
            want[p] = want.get(p, 0) + 1
        if any(self.refs[p] < n for p, n in want.items()):
            return None
        freed = []
        for p in pages:
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
        return freed


def num_free(pool) -> int:
    value = pool.num_free
    value = value() if callable(value) else value
    check_type(value, int, "num_free")
    return value


def check_state(pool, model: Model, history: list[str]) -> None:
    where = "操作序列：" + "；".join(history[-6:])
    for page, want in model.refs.items():
        got = pool.refs(page)
        check_type(got, int, f"refs({page})")
        if got != want:
            hint = ""
            if want > 0 and got == 0:
                hint = f"\n  {page} 号页还有 {want} 份持有，不应该变成空闲：只有最后一份放下时才空闲"
            check(False, f"refs({page}) 应该是 {want}，你的是 {got}\n  {where}{hint}")
    check_equal(num_free(pool), len(model.free_pages()), "num_free（空闲页的个数）", where)


def run_sequence(PagePool, rng: random.Random) -> None:
    n = rng.randint(1, 12)
    pool, model, history = PagePool(n), Model(n), [f"PagePool({n})"]
    check_state(pool, model, history)
    for _ in range(rng.randint(5, 40)):
        held = [p for p, r in model.refs.items() if r > 0]
        op = rng.random()
        if op < 0.08:  # hold / release 的列表里有一个不存在的页号：在随机位置，就在边界上（-1、n）或者更远
            pages = [rng.choice(held) for _ in range(rng.randint(0, 4))] if held else []
            bad = rng.choice([-1, n, -rng.randint(2, n + 5), n + rng.randint(1, 100)])
            pages.insert(rng.randrange(len(pages) + 1), bad)
            name = rng.choice(["hold", "release"])
            history.append(f"{name}({pages})")
            check_raises(ValueError, getattr(pool, name), list(pages),
                         what=f"{name}({pages})（{bad} 号页不存在：页号是 0 … {n - 1}）")
            history[-1] += "（ValueError，什么都不改）"
        elif op < 0.35:  # alloc，偶尔要得太多
            free = len(model.free_pages())
            k = rng.randint(0, free) if rng.random() < 0.8 else free + rng.randint(1, 3)
            history.append(f"alloc({k})")
            if k > free:
                check_raises(ValueError, pool.alloc, k,
                             what=f"alloc({k})（只剩 {free} 页空闲）")
            else:
                got = pool.alloc(k)
                check_int_list(got, f"alloc({k}) 的返回值")
                check_equal(len(got), k, f"alloc({k}) 返回的页数", "；".join(history[-6:]))
                check(len(set(got)) == k, f"alloc({k}) 返回了重复的页：{got}")
                for p in got:
                    check(p in model.refs and model.refs[p] == 0,
                          f"alloc({k}) 给出了 {p} 号页，可它不是空闲页（现在有 {model.refs.get(p)} 份持有）"
                          f"\n  操作序列：{'；'.join(history[-6:])}")
                    model.refs[p] = 1
                history[-1] += f" -> {got}"
        elif op < 0.6 and held:  # hold，偶尔夹一个空闲页
            pages = [rng.choice(held) for _ in range(rng.randint(1, 4))]
            free = model.free_pages()
            if free and rng.random() < 0.25:
                pages.insert(rng.randrange(len(pages) + 1), rng.choice(free))
                history.append(f"hold({pages})")
                check_raises(ValueError, pool.hold, list(pages),
                             what=f"hold({pages})（里面有空闲页）")
            else:
                history.append(f"hold({pages})")
                pool.hold(list(pages))
                for p in pages:
                    model.refs[p] += 1
        elif held:  # release，偶尔放多了
            pages = [rng.choice(held) for _ in range(rng.randint(1, 5))]
            history.append(f"release({pages})")
            before = dict(model.refs)
            want = model.release(pages)
            if want is None:
                check_raises(ValueError, pool.release, list(pages),
                             what=f"release({pages})（有一页要放下的份数比它现有的多）")
                model.refs = before
            else:
                got = pool.release(list(pages))
                check_int_list(got, f"release({pages}) 的返回值")
                check_equal(got, want, f"release({pages}) 返回的“这一次变成空闲的页”",
                            "；".join(history[-6:]))
        check_state(pool, model, history)


def check_example(PagePool) -> None:
    pool = PagePool(3)
    a = pool.alloc(2)
    check_int_list(a, "例子里 alloc(2) 的返回值")
    pool.hold(a)
    check_equal(pool.release(a), [], "例子：hold 之后 release(a) 的返回值（各剩 1 份，谁都没空闲）")
    check_equal(num_free(pool), 1, "例子：行放下自己那份之后的 num_free")
    check_equal(pool.release(a[:1]), [a[0]], "例子：缓存逐出第一页时 release 的返回值")
    check_equal(num_free(pool), 2, "例子：逐出之后的 num_free")
    check_raises(ValueError, pool.release, a[:1], what="例子：再放一次 release([a[0]])（它没人持有了）")
    check_raises(ValueError, pool.hold, [99], what="hold([99])（没有这一页）")
    check_equal(pool.alloc(0), [], "alloc(0) 的返回值")

    # 不存在的页号：-1 不是“最后一页”，3 也不是；出错时什么都不改
    pool = PagePool(3)
    pages = pool.alloc(3)
    for call, args, why in [(pool.release, [-1], "-1 号页不存在"), (pool.release, [3], "3 号页不存在"),
                            (pool.release, [pages[0], 7], "7 号页不存在"), (pool.hold, [-1], "-1 号页不存在"),
                            (pool.hold, [pages[0], 3], "3 号页不存在")]:
        name = "release" if call == pool.release else "hold"
        check_raises(ValueError, call, list(args), what=f"三页都分出去之后 {name}({args})（{why}）")
        check_equal([pool.refs(p) for p in range(3)], [1, 1, 1],
                    f"{name}({args}) 抛了 ValueError 之后三页的份数（出错时什么都不改）")
        check_equal(num_free(pool), 0, f"{name}({args}) 抛了 ValueError 之后的 num_free")


def run(mod) -> None:
    PagePool = require(mod, "PagePool")
    check_example(PagePool)
    rng = random.Random(SEED)
    for _ in range(40):  # 每次评测的种子都不同；每次调用都跨一次进程
        run_sequence(PagePool, rng)


if __name__ == "__main__":
    main(run)
