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
    probe_bad_arguments,
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


def make_case(rng: random.Random, page_size: int | None = None):
    """一张页表、一批请求，以及每一行用的页（参考答案要用）。"""
    page_size = page_size or rng.choice([1, 1, 2, 4, 4, 8, 16, rng.randint(3, 16)])
    num_rows = rng.randint(1, 6)
    free = list(range(num_rows * 40 + rng.randint(3, 100)))  # 够每行都用满 40 个 token
    rng.shuffle(free)
    shared = [free.pop() for _ in range(rng.randint(0, 3))]  # 前缀缓存里的几页，几行共用
    table, pages_of, lengths = [], {}, {}
    for row in range(num_rows):
        length = rng.randint(1, 40)
        n = -(-length // page_size)
        own = shared[: rng.randint(0, min(len(shared), n))] if rng.random() < 0.5 else []
        pages = own + [free.pop() for _ in range(n - len(own))]
        width = length + rng.choice([0, 0, rng.randint(1, 9)])
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


def misaligned_table(rng: random.Random, table, reqs, page_size: int):
    """悄悄改坏一个被用到的槽位（page_size >= 2）：改完以后它一定不守规则。"""
    assert page_size >= 2
    bad = copy.deepcopy(table)
    row, _, device_len = rng.choice(reqs)
    j = rng.randrange(device_len)
    old = bad[row][j]
    if j % page_size:  # 页内的 token：挪一格，或者挪到别的页
        choices = [old + 1 if j % page_size < page_size - 1 else old - 1, old + page_size * rng.randint(1, 5)]
    else:  # 页首：不再是 page_size 的倍数；这页后面还有 token 时，也可以整个换一页（和后面的对不上）
        choices = [old + rng.randint(1, page_size - 1)]
        if j + 1 < device_len:
            choices.append(old + page_size * rng.randint(1, 5))
    bad[row][j] = rng.choice(choices)
    return bad


def check_bad_arguments(mod, rng: random.Random) -> None:
    table, reqs, page_size, _ = make_case(rng)
    good = dict(table=table, reqs=reqs, page_size=page_size)

    def spoil_req(r, index: int, value):
        out = list(reqs)
        i = r.randrange(len(out))
        item = list(out[i])
        item[index] = value(item, r)
        out[i] = tuple(item)
        return out

    bad = {
        "page_size": lambda r: bad_int(r, 1),
        "reqs": lambda r: r.choice([
            [],
            spoil_req(r, 0, lambda it, r: r.choice([len(table), len(table) + r.randint(1, 9), -1])),  # 行号越界
            spoil_req(r, 1, lambda it, r: r.choice([0, bad_int(r, 0)])),  # 没有 query
            spoil_req(r, 1, lambda it, r: it[2] + r.randint(1, 5)),  # query 比 key 多
            spoil_req(r, 2, lambda it, r: len(table[it[0]]) + r.randint(1, 5)),  # 比页表这一行还宽
        ]),
    }
    probe_bad_arguments(mod.flashinfer_layout, good, bad, rng, name="flashinfer_layout", tries=8)
    for _ in range(6):  # 槽位不守规则的页表：每次评测都查几回，不靠抽签碰上（page_size 1 时任何槽位都守规则）
        table, reqs, page_size, _ = make_case(rng, page_size=rng.choice([2, 4, 8, 16, rng.randint(3, 16)]))
        bad_table = misaligned_table(rng, table, reqs, page_size)
        check_raises(ValueError, mod.flashinfer_layout, bad_table, reqs, page_size,
                     what=f"flashinfer_layout(有一个槽位不守规则的页表, reqs={short(reqs, 60)}, page_size={page_size})")


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
