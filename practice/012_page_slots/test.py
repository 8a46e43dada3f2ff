"""练习 012 的评测：模拟一长串随机请求，每一步都和参考实现比较返回值、页表和空闲页列表。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import copy
import random
import sys
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parent.parent)
)  # 找到 practice/judgekit.py
from judgekit import (
    seed,
    probe_bad_arguments,
    check,
    check_equal,
    check_int_list,
    check_raises,
    main,
    require,
    short,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
EMPTY = -1  # 页表里还没填过的位置


# ---------------------------------------------------------------------------
# 参考实现：不读页表，每个请求自己记一张“它按顺序拿到的页”的列表，
# 位置 pos 的槽位直接算：pages[pos // page_size] * page_size + pos % page_size。
# ---------------------------------------------------------------------------


class RefAllocator:
    def __init__(self, free_pages: list[int], page_size: int) -> None:
        self.free = list(free_pages)
        self.page_size = page_size
        self.pages: dict[int, list[int]] = {}  # row -> 这个请求的页，按位置顺序
        self.length: dict[int, int] = {}  # row -> 已经分配到的位置数

    def slot(self, row: int, pos: int) -> int:
        return (
            self.pages[row][pos // self.page_size] * self.page_size
            + pos % self.page_size
        )

    def pages_needed(self, row: int, end: int) -> int:
        have = len(self.pages.get(row, []))
        want = -(-end // self.page_size)
        return max(0, want - have)

    def alloc(self, row: int, end: int) -> list[int] | None:
        """把 row 从当前长度扩到 end；页不够时返回 None（什么都不改）。"""
        need = self.pages_needed(row, end)
        if need > len(self.free):
            return None
        start = self.length.get(row, 0)
        self.pages.setdefault(row, []).extend(self.free[:need])
        self.free = self.free[need:]
        self.length[row] = end
        return [self.slot(row, pos) for pos in range(start, end)]

    def release(self, row: int) -> None:
        self.free += self.pages.pop(row)
        del self.length[row]


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def call_text(row: int, start: int, end: int, page_size: int) -> str:
    return f"alloc_slots(table, row={row}, start={start}, end={end}, free_pages, page_size={page_size})"


def check_alloc(
    mod, ref: RefAllocator, table, free_pages, row: int, end: int, context: str
):
    page_size = ref.page_size
    start = ref.length.get(row, 0)
    call = call_text(row, start, end, page_size)
    where = f"{context}\n  调用前 free_pages = {short(free_pages)}"
    before_table = copy.deepcopy(table)
    before_free = list(free_pages)
    want = ref.alloc(row, end)

    if want is None:
        need = ref.pages_needed(row, end)
        check_raises(
            RuntimeError,
            mod.alloc_slots,
            table,
            row,
            start,
            end,
            free_pages,
            page_size,
            what=f"{call}（需要 {need} 页新的，空闲页只剩 {len(before_free)} 页）",
        )
        check_equal(
            free_pages,
            before_free,
            "空闲页不够、报错之后的 free_pages（应该原样不动）",
            call,
        )
        for r in range(len(table)):
            check_equal(
                table[r],
                before_table[r],
                f"空闲页不够、报错之后页表的第 {r} 行（失败时什么都不能改，包括不需要新页的那几个位置）",
                call,
            )
        return

    got = mod.alloc_slots(table, row, start, end, free_pages, page_size)
    check_int_list(got, f"{call} 的返回值")
    check_equal(len(got), end - start, f"{call} 返回的槽位个数", where)
    for i, pos in enumerate(range(start, end)):
        if got[i] != want[i]:
            page = ref.pages[row][pos // page_size]
            fresh = pos % page_size == 0
            why = (
                f"位置 {pos} 是一页的开头（{pos} % {page_size} == 0），要从 free_pages 最前面取新页 {page}"
                if fresh and pos >= start
                else f"位置 {pos} 和位置 {pos - 1} 在同一页（页 {page}），槽位是前一个加 1"
            )
            check(
                False,
                f"{call} 的返回值不对：位置 {pos} 的槽位应该是 {want[i]}，你的是 {got[i]}。\n"
                f"  {why}\n  {where}\n  应该返回：{short(want)}\n  你返回的：{short(got)}",
            )
    check_equal(
        table[row][start:end], want, f"{call} 之后的 table[{row}][{start}:{end}]", where
    )
    check_equal(
        table[row][:start],
        before_table[row][:start],
        f"{call} 之后的 table[{row}][:{start}]（前面已经填好的位置不该动）",
        where,
    )
    check_equal(
        table[row][end:],
        before_table[row][end:],
        f"{call} 之后的 table[{row}][{end}:]（只该写 [start, end)）",
        where,
    )
    for r in range(len(table)):
        if r != row:
            check_equal(
                table[r], before_table[r], f"{call} 之后页表的第 {r} 行（别的行不该动）"
            )
    check_equal(
        free_pages,
        ref.free,
        f"{call} 之后的 free_pages（新页从最前面取，原地删掉）",
        where,
    )


def check_free(
    mod, ref: RefAllocator, table, free_pages, row: int, context: str
) -> None:
    length = ref.length[row]
    call = f"free_row(table, row={row}, length={length}, free_pages, page_size={ref.page_size})"
    before = list(free_pages)
    ref.release(row)
    mod.free_row(table, row, length, free_pages, ref.page_size)
    check_equal(
        free_pages,
        ref.free,
        f"{call} 之后的 free_pages（这一行的页按位置顺序追加到末尾，每页一次）",
        f"{context}\n  调用前 free_pages = {short(before)}",
    )


def check_invariants(ref: RefAllocator, table, context: str) -> None:
    """活着的请求：页表内容对、槽位两两不同、每个请求正好占 ceil(长度 / page_size) 页。"""
    owner: dict[int, int] = {}
    for row, length in ref.length.items():
        want = [ref.slot(row, pos) for pos in range(length)]
        check_equal(
            table[row][:length], want, f"页表第 {row} 行的前 {length} 个位置", context
        )
        for slot in table[row][:length]:
            check(
                slot not in owner,
                f"{context}：槽位 {slot} 同时属于第 {owner.get(slot)} 行和第 {row} 行，两个请求共用了一个槽位",
            )
            owner[slot] = row
        pages = {slot // ref.page_size for slot in table[row][:length]}
        check_equal(
            len(pages),
            -(-length // ref.page_size),
            f"第 {row} 行（长度 {length}）占用的页数",
            context,
        )


def check_example(mod) -> None:
    """题目里的例子。"""
    table = [[EMPTY] * 16]
    free_pages = [7, 2, 5]
    context = "题目里的例子：page_size=4，free_pages=[7, 2, 5]"
    steps = [
        (0, 6, [28, 29, 30, 31, 8, 9], [5]),
        (6, 7, [10], [5]),
        (7, 8, [11], [5]),
        (8, 9, [20], []),
    ]
    for start, end, slots, rest in steps:
        call = call_text(0, start, end, 4)
        got = mod.alloc_slots(table, 0, start, end, free_pages, 4)
        check_int_list(got, f"{call} 的返回值")
        check_equal(got, slots, call, context)
        check_equal(free_pages, rest, f"{call} 之后的 free_pages", context)
    before = copy.deepcopy(table)
    check_raises(
        RuntimeError,
        mod.alloc_slots,
        table,
        0,
        9,
        13,
        free_pages,
        4,
        what=f"{call_text(0, 9, 13, 4)}（位置 12 要一页新的，可空闲页已经没了）",
    )
    check_equal(
        table[0],
        before[0],
        "报错之后页表的第 0 行（位置 9、10、11 也不能先填上）",
        context,
    )
    check_equal(free_pages, [], "报错之后的 free_pages", context)
    mod.free_row(table, 0, 9, free_pages, 4)
    check_equal(
        free_pages,
        [7, 2, 5],
        "free_row(table, 0, 9, free_pages, 4) 之后的 free_pages",
        context,
    )


def check_bad_arguments(mod, rng: random.Random) -> None:
    """坏参数：页表几行、每行多长、哪一行、page_size、空闲页都随机；坏值就在边界上或者远一些。
    报错之后 table 和 free_pages 都得原样不动。"""
    for _ in range(3):
        page_size = rng.choice([1, 2, 3, 4, 16])
        # 每行长度不一样：拿别的行（比如第 0 行）的长度去查 end 的代码过不去
        lengths = rng.sample(range(1, 65), rng.randint(2, 5))
        row = rng.randrange(len(lengths))
        width = lengths[row]
        table = [[EMPTY] * n for n in lengths]
        free_pages = rng.sample(range(100), rng.randint(0, 12))
        start = rng.randint(0, width)
        end = rng.randint(start, width)
        calls = []

        def alloc(table, row, start, end, free_pages, page_size):
            calls.append((table, free_pages))  # 学习者改过的就是这两个（跨进程传回来了）
            return mod.alloc_slots(table, row, start, end, free_pages, page_size)

        good = dict(table=table, row=row, start=start, end=end, free_pages=free_pages, page_size=page_size)
        # 每个界都查两次：就在边界上一次、远一些一次（只拦一个写死的坏值的代码过不去）
        kinds = [
            ("page_size", lambda r: 0), ("page_size", lambda r: -r.randint(1, 1000)),
            ("start", lambda r: -1), ("start", lambda r: -r.randint(2, 1000)),
            ("start", lambda r: end + r.choice([1, r.randint(2, 40)])),  # 比 end 大
            ("end", lambda r: width + 1), ("end", lambda r: width + r.randint(2, 1000)),  # 超出这一行
            ("end", lambda r: start - r.choice([1, r.randint(2, 40)])),  # 比 start 小
        ]
        for key, spoil in kinds:
            probe_bad_arguments(alloc, good, {key: spoil}, rng, name="alloc_slots", tries=1)
            got_table, got_free = calls[-1]
            check_equal(got_free, free_pages, f"alloc_slots（{key} 是坏的）报错之后的 free_pages（不该动）")
            check_equal(got_table, table, f"alloc_slots（{key} 是坏的）报错之后的页表（不该动）")

        before = list(free_pages)
        got = mod.alloc_slots(table, row, start, start, free_pages, page_size)
        check_equal(got, [], f"{call_text(row, start, start, page_size)}（空区间）的返回值")
        check_equal(free_pages, before, "空区间之后的 free_pages（不该动）")

        def free(table, row, length, free_pages, page_size):
            return mod.free_row(table, row, length, free_pages, page_size)

        good = dict(table=table, row=row, length=rng.randint(0, width), free_pages=free_pages, page_size=page_size)
        kinds = [
            ("length", lambda r: width + 1), ("length", lambda r: width + r.randint(2, 1000)),  # 超出这一行
            ("length", lambda r: -1), ("length", lambda r: -r.randint(2, 1000)),
            ("page_size", lambda r: 0), ("page_size", lambda r: -r.randint(1, 1000)),
        ]
        for key, spoil in kinds:
            probe_bad_arguments(free, good, {key: spoil}, rng, name="free_row", tries=1)


def simulate(
    mod, rng: random.Random, page_size: int, num_pages: int, num_rows: int, row_len: int
) -> None:
    table = [[EMPTY] * row_len for _ in range(num_rows)]
    free_pages = list(range(num_pages))
    rng.shuffle(free_pages)  # 空闲页不按顺序：槽位不能从位置“算”出来
    ref = RefAllocator(free_pages, page_size)
    context = (
        f"page_size={page_size}，一共 {num_pages} 页，页表 {num_rows} 行 × {row_len} 列"
    )
    history: list[str] = []

    for _ in range(120):
        live = sorted(ref.length)
        idle = [r for r in range(num_rows) if r not in ref.length]
        choice = rng.random()
        if idle and (choice < 0.3 or not live):
            row = rng.choice(idle)
            end = rng.randint(1, row_len // 2)
            history.append(f"新请求占第 {row} 行、prefill {end} 个 token")
            check_alloc(
                mod,
                ref,
                table,
                free_pages,
                row,
                end,
                f"{context}；最近的操作：{'；'.join(history[-3:])}",
            )
            if row not in ref.length:  # 页不够，请求没进来
                continue
        elif live and choice < 0.85:
            row = rng.choice(live)
            length = ref.length[row]
            if length == row_len:
                continue
            step = 1 if rng.random() < 0.7 else rng.randint(2, 3 * page_size + 2)
            end = min(row_len, length + step)
            history.append(f"第 {row} 行从 {length} 扩到 {end}")
            check_alloc(
                mod,
                ref,
                table,
                free_pages,
                row,
                end,
                f"{context}；最近的操作：{'；'.join(history[-3:])}",
            )
        elif live:
            row = rng.choice(live)
            history.append(f"第 {row} 行的请求结束（长度 {ref.length[row]}）")
            check_free(
                mod,
                ref,
                table,
                free_pages,
                row,
                f"{context}；最近的操作：{'；'.join(history[-3:])}",
            )
        check_invariants(
            ref, table, f"{context}；最近的操作：{'；'.join(history[-3:])}"
        )

    for row in sorted(ref.length):  # 全部结束：所有页都回来了
        check_free(mod, ref, table, free_pages, row, f"{context}；收尾，结束所有请求")
    check_equal(
        sorted(free_pages),
        list(range(num_pages)),
        "所有请求都结束之后的空闲页（应该一页不少）",
        context,
    )


def run(mod: object) -> None:
    require(mod, "alloc_slots")
    require(mod, "free_row")

    check_example(mod)
    rng = random.Random(SEED)
    check_bad_arguments(mod, random.Random(SEED + 1))
    for page_size in (1, 2, 3, 4, 16):
        simulate(
            mod, rng, page_size, num_pages=rng.randint(4, 24), num_rows=5, row_len=48
        )
    for _ in range(4):
        page_size = rng.randint(1, 8)
        simulate(
            mod,
            rng,
            page_size,
            num_pages=rng.randint(2, 40),
            num_rows=rng.randint(2, 6),
            row_len=rng.randint(8, 64),
        )


if __name__ == "__main__":
    main(run)
