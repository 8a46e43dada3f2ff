"""练习 051 的评测：模拟分配器造出页表（页随机取、共用前缀的页、行比长度宽），和参考实现逐项比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import copy
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (
    bad_int,
    check_equal,
    check_int_list,
    check_raises,
    check_type,
    main,
    mistake_hint,
    require,
    seed,
    short,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
KEYS = ("qo_indptr", "kv_indptr", "kv_indices", "last_page_len")


# ---------------------------------------------------------------------------
# 参考实现：不从页表反推，而是记着分配器给每个请求的页（测试自己造的页表，知道答案）
# ---------------------------------------------------------------------------


def ref_layout(pages_of: dict[int, list[int]], reqs, page_size: int) -> dict[str, list[int]]:
    out = {k: [] for k in KEYS}
    out["qo_indptr"], out["kv_indptr"] = [0], [0]
    for row, extend_len, device_len in reqs:
        n = -(-device_len // page_size)
        out["qo_indptr"].append(out["qo_indptr"][-1] + extend_len)
        out["kv_indptr"].append(out["kv_indptr"][-1] + n)
        out["kv_indices"] += pages_of[row][:n]
        out["last_page_len"].append(device_len - (n - 1) * page_size)
    return out


def make_case(rng: random.Random, page_size: int | None = None, tails: bool = True):
    """一张页表、一批请求，以及每一行用的页（参考答案要用）。"""
    page_size = page_size or rng.choice([1, 1, 2, 4, 4, 8, 16, rng.randint(3, 16), rng.randint(17, 64)])
    num_rows = rng.randint(1, 6)
    longest = rng.choice([40, 40, 300])  # 偶尔有几百个 token 的长请求
    free = list(range(num_rows * longest + rng.randint(3, 100)))  # 够每行都用满
    rng.shuffle(free)
    shared = [free.pop() for _ in range(rng.randint(0, 3))]  # 前缀缓存里的几页，几行共用
    table, pages_of, lengths = [], {}, {}
    for row in range(num_rows):
        length = rng.randint(1, longest)
        n = -(-length // page_size)
        own = shared[: rng.randint(0, min(len(shared), n))] if rng.random() < 0.5 else []
        pages = own + [free.pop() for _ in range(n - len(own))]
        width = length + (rng.choice([0, 0, rng.randint(1, 9)]) if tails else 0)
        slots = [pages[j // page_size] * page_size + j % page_size for j in range(length)]
        table.append(slots + [rng.randrange(10**4) for _ in range(width - length)])  # 行尾没用的旧数字
        pages_of[row], lengths[row] = pages, length
    rows = rng.sample(range(num_rows), rng.randint(1, num_rows))  # 不必按行号排，也不必每行都在这一批里
    decode = rng.random() < 0.5
    reqs = [(row, 1 if decode else rng.randint(1, lengths[row]), lengths[row]) for row in rows]
    return table, reqs, page_size, pages_of


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def guess(got: dict, table, reqs, page_size: int, pages_of) -> str:
    hits = []
    lens = [d for _, _, d in reqs]
    if got.get("last_page_len") == [d % page_size for d in lens]:
        hits.append("last_page_len 用了 device_len % page_size：最后一页正好满时应该是 page_size，不是 0")
    token_indptr = [0]
    for d in lens:
        token_indptr.append(token_indptr[-1] + d)
    if got.get("kv_indptr") == token_indptr and page_size > 1:
        hits.append("kv_indptr 数的是 token（key 的个数），FlashInfer 要的是页数")
    if got.get("kv_indices") == [table[r][j] // page_size for r, _, d in reqs for j in range(d)] and page_size > 1:
        hits.append("kv_indices 每个 token 放了一次页号：一页只放一次")
    if got.get("qo_indptr") == ref_layout(pages_of, [(r, d, d) for r, _, d in reqs], page_size)["qo_indptr"]:
        hits.append("qo_indptr 数的是全部 key：这一步的 query 只有 extend_len 个")
    return mistake_hint(hits)


def check_case(mod, table, reqs, page_size: int, pages_of) -> None:
    before = (copy.deepcopy(table), copy.deepcopy(reqs))
    call = f"flashinfer_layout(table, reqs={short(reqs, 80)}, page_size={page_size})"
    got = mod.flashinfer_layout(table, reqs, page_size)
    check_type(got, dict, f"{call} 的返回值")
    check_equal(sorted(got), sorted(KEYS), f"{call} 返回的字典的键")
    for key in KEYS:
        check_int_list(got[key], f"{call} 的 {key}")
    want = ref_layout(pages_of, reqs, page_size)
    rows = "\n".join(f"    table[{r}][:{d}] = {short(table[r][:d], 100)}" for r, _, d in reqs)
    for key in KEYS:
        check_equal(got[key], want[key], f"{call} 的 {key}",
                    f"page_size = {page_size}，reqs = {reqs}\n{rows}" + guess(got, table, reqs, page_size, pages_of))
    check_equal((table, reqs), before, f"{call} 之后的参数（不该改动 table 和 reqs）")


MISALIGN = ("swap", "shift", "other_page")


def misaligned_table(rng: random.Random, table, reqs, page_size: int, kind: str):
    """悄悄改坏一个被用到的槽位（page_size >= 2），改完以后它一定不守规则：
    swap        同一页里的两个槽位对调（这一页的槽位集合没变，顺序错了）；
    shift       一个槽位挪一格（页内偏移对不上）；
    other_page  一个槽位换到别的页的同一个偏移上（偏移对得上，页号对不上）。"""
    assert page_size >= 2
    bad = copy.deepcopy(table)
    # 挑一个至少有两个 token 的页（三种改法都要这一页里还有别的 token 作对照）
    need = 3 if kind == "swap" else 2  # 对调的两个都不是页首：只查页首和槽位之和的写法也看不出来
    pages = [(row, start, min(start + page_size, d)) for row, _, d in reqs for start in range(0, d, page_size)
             if min(start + page_size, d) - start >= need]
    if not pages:
        return None
    row, start, end = rng.choice(pages)
    if kind == "swap":
        a, b = rng.sample(range(start + 1, end), 2)
        bad[row][a], bad[row][b] = bad[row][b], bad[row][a]
    elif kind == "shift":
        j = rng.randrange(start, end)
        bad[row][j] += 1 if j < end - 1 or j % page_size < page_size - 1 else -1
        if bad[row][j] == table[row][j]:
            bad[row][j] += 2
    else:
        j = rng.randrange(start, end)
        bad[row][j] += page_size * rng.randint(1, 5)
    return bad


def check_bad_arguments(mod, rng: random.Random) -> None:
    """每一种坏参数每次评测都试一回（坏的是哪个请求、坏成什么值，随机）：不靠抽签碰上。"""
    table, reqs, page_size, _ = make_case(rng, tails=False)  # 行尾没有旧数字：查“比这一行还长”时不会碰巧别处出错

    def spoil_req(index: int, value):
        out = list(reqs)
        i = rng.randrange(len(out))
        item = list(out[i])
        item[index] = value(item)
        out[i] = tuple(item)
        return out

    kinds = [
        ("page_size 是 0", table, reqs, 0),
        ("page_size 是负数", table, reqs, bad_int(rng, 0)),
        ("page_size 是 -1", [[5]], [(0, 1, 1)], -1),  # 不查 page_size 的写法在这里不会碰巧报错
        ("reqs 是空的", table, [], page_size),
        ("行号越界（太大）", table, spoil_req(0, lambda it: len(table) + rng.randint(0, 9)), page_size),
        # 负的行号：Python 的列表照样能取（取到的正是同一行），不查的写法不会碰巧报错
        ("行号是负数", table, spoil_req(0, lambda it: it[0] - len(table)), page_size),
        ("这一步 0 个 query", table, spoil_req(1, lambda it: 0), page_size),
        ("这一步的 query 数是负数", table, spoil_req(1, lambda it: bad_int(rng, 0)), page_size),
        ("query 比 key 多", table, spoil_req(1, lambda it: it[2] + rng.randint(1, 5)), page_size),
        ("key 比页表这一行还多", table, spoil_req(2, lambda it: len(table[it[0]]) + rng.randint(1, 5)), page_size),
    ]
    for why, t, r, ps in kinds:
        check_raises(ValueError, mod.flashinfer_layout, copy.deepcopy(t), r, ps,
                     what=f"flashinfer_layout(table, reqs={short(r, 60)}, page_size={ps})（{why}）")
    # 槽位不守规则的页表：三种改法 × 小页、大页各一回（page_size 1 时任何槽位都守规则）
    for kind in MISALIGN:
        for page_size in (rng.choice([4, 8, 16]), rng.randint(17, 64)):
            bad_table = None
            while bad_table is None:
                table, reqs, _, _ = make_case(rng, page_size=page_size)
                bad_table = misaligned_table(rng, table, reqs, page_size, kind)
            check_raises(ValueError, mod.flashinfer_layout, bad_table, reqs, page_size,
                         what=f"flashinfer_layout(有一个槽位不守规则的页表（{kind}）, reqs={short(reqs, 60)}, "
                              f"page_size={page_size})")


def run(mod: object) -> None:
    require(mod, "flashinfer_layout")
    rng = random.Random(SEED)
    example = mod.flashinfer_layout([[8, 9, 10, 11, 20, 21, 22], [4, 5, 6]], [(0, 2, 7), (1, 1, 3)], 4)
    check_equal(example, {"qo_indptr": [0, 2, 3], "kv_indptr": [0, 2, 3], "kv_indices": [2, 5, 1],
                          "last_page_len": [3, 3]}, "题面里的例子")
    for _ in range(120):
        check_case(mod, *make_case(rng))
    check_bad_arguments(mod, random.Random(SEED + 1))


if __name__ == "__main__":
    main(run)
