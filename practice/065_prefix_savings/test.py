"""练习 065 的评测：随机的负载（共享一段或两段系统提示的、一模一样的提示、互不相干的；一批 1 到 16 个请求、
1 到 6 批；page_size 取 1、2、4、16），和参考实现（一棵按页建的树）比较每个请求要算的 token 数；
查参数没被改动；坏参数每种都试。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import copy
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (ONLY_STDLIB, CheckFailed, check_raises, check_type, in_child, kept_repr, main, mistake_hint,
                      require, seed, short)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
PAGES = (1, 2, 4, 16)


# ---------------------------------------------------------------------------
# 参考实现：一棵树，每条边是一整页（page_size 个 token 的 tuple）
# ---------------------------------------------------------------------------


def ref_costs(batches, page, *, same_batch=False, whole_prompt=False, round_pages=True, only_first=False):
    root: dict = {}
    first: list | None = None

    def match(ids):
        if only_first:
            n = 0
            for a, b in zip(ids, first or []):
                if a != b:
                    break
                n += 1
            return n - n % page if round_pages else n
        node, n = root, 0
        step = page if round_pages else 1
        while n + step <= len(ids) and tuple(ids[n:n + step]) in node:
            node = node[tuple(ids[n:n + step])]
            n += step
        return n

    def insert(ids):
        nonlocal first
        step = page if round_pages else 1
        if only_first and first is None:
            first = ids[:len(ids) - len(ids) % step]
        node = root
        for i in range(0, len(ids) - len(ids) % step, step):
            node = node.setdefault(tuple(ids[i:i + step]), {})

    out = []
    for batch in batches:
        row = []
        for prompt in batch:
            key = prompt if whole_prompt else prompt[:-1]
            row.append(len(prompt) - match(key))
            if same_batch:
                insert(prompt)
        out.append(row)
        if not same_batch:
            for prompt in batch:
                insert(prompt)
    return out


MISTAKES = [
    ("同一批的请求用上了彼此的前缀：一批里的请求同时 prefill，要这一批全部算完才插进树",
     dict(same_batch=True)),
    ("拿整个提示去匹配了：最后一个 token 总要算（它的 logits 给出第一个输出 token），匹配用提示去掉最后一个 token",
     dict(whole_prompt=True)),
    ("匹配长度没有向下取整到 page_size 的倍数：树按页存，不满一页的那部分命中不了", dict(round_pages=False)),
    ("只和最早插进树的那一条序列比了：要和树里每一条已有的序列比，取最长的公共前缀", dict(only_first=True)),
]


def hints(batches, page, got) -> str:
    want = ref_costs(batches, page)
    return mistake_hint([text for text, opts in MISTAKES
                         if ref_costs(batches, page, **opts) == got and got != want])


# ---------------------------------------------------------------------------
# 随机的负载
# ---------------------------------------------------------------------------


def random_case(rng: random.Random):
    vocab = rng.choice([3, 6, 1000])  # 词表小：偶然的公共前缀也多
    systems = [[rng.randrange(vocab) for _ in range(rng.randint(1, 40))] for _ in range(rng.choice([1, 1, 2]))]
    pool: list[list[int]] = []

    def prompt():
        kind = rng.random()
        if kind < 0.15 and pool:
            return list(rng.choice(pool))  # 一模一样的提示
        if kind < 0.3:
            return [rng.randrange(vocab) for _ in range(rng.randint(1, 30))]  # 互不相干
        p = rng.choice(systems) + [rng.randrange(vocab) for _ in range(rng.randint(0, 12))]
        pool.append(p)
        return list(p)

    batches = [[prompt() for _ in range(rng.choice([1, 2, rng.randint(3, 16)]))] for _ in range(rng.randint(1, 6))]
    return batches, rng.choice(PAGES)


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def check_case(mod, batches, page, kind: str) -> None:
    call = f"prefill_costs({short(batches, 200)}, {page})（{kind}）"
    held = in_child(mod, copy.deepcopy(batches))
    got = mod.prefill_costs(held, page)
    check_type(got, list, f"{call} 的返回值")
    want = ref_costs(batches, page)
    if len(got) != len(want):
        raise CheckFailed(f"{call} 返回了 {len(got)} 批，应该和 batches 一样是 {len(want)} 批")
    for b, (row, want_row) in enumerate(zip(got, want)):
        check_type(row, list, f"{call} 的第 {b} 批")
        for x in row:
            check_type(x, int, f"{call} 第 {b} 批里的数")
    if got != want:
        raise CheckFailed(f"{call} 不对：每个请求要算的 token 数（提示长度 − 匹配到的长度）应该是 {short(want, 150)}，"
                          f"你的是 {short(got, 150)}" + hints(batches, page, got))
    after = kept_repr(mod, held)
    if after != repr(batches):  # repr 分得出 1 和 1.0、列表和元组
        raise CheckFailed(f"{call} 改动了 batches：调用之后是 {short(after, 200)}（不该改动参数）")


def three_places(rng: random.Random, n: int) -> list[int]:
    """开头、中间、末尾：只查第一个 / 最后一个元素的代码总会被抓到。"""
    return sorted({0, rng.randrange(n), n - 1})


def check_bad_arguments(mod, rng: random.Random) -> None:
    batches, page = random_case(rng)
    while len(batches) < 3 or not any(len(b) >= 3 and all(len(p) >= 3 for p in b) for b in batches):
        batches, page = random_case(rng)
    for bad_page in (0, -1, True, 2.0, "4", None):  # 每一种都试
        check_raises(ValueError, mod.prefill_costs, batches, bad_page, what=f"prefill_costs(…, {bad_page!r})（page_size 不对）")
    for bad in (None, "abc", tuple(batches), {0: batches[0]}):
        check_raises(ValueError, mod.prefill_costs, bad, page, what=f"prefill_costs({short(bad, 60)}, {page})")

    def expect_error(bad, what):
        check_raises(ValueError, mod.prefill_costs, bad, page, what=f"prefill_costs({short(bad, 120)}, {page})（{what}）")

    for b in three_places(rng, len(batches)):
        for value, what in (([], "是空的"), (tuple(batches[b]), "是 tuple"), (None, "是 None")):
            expect_error(batches[:b] + [value] + batches[b + 1:], f"第 {b} 批{what}")
    b = next(i for i, batch in enumerate(batches) if len(batch) >= 3 and all(len(p) >= 3 for p in batch))
    batch = batches[b]
    for r in three_places(rng, len(batch)):
        for value, what in (([], "是空的"), (tuple(batch[r]), "是 tuple"), ("abc", "是字符串"), (None, "是 None")):
            expect_error(batches[:b] + [batch[:r] + [value] + batch[r + 1:]] + batches[b + 1:], f"第 {b} 批第 {r} 个提示{what}")
        prompt = batch[r]
        for t in three_places(rng, len(prompt)):
            for value in (-rng.randint(1, 9), True, float(prompt[t]), "7", None):
                bad_prompt = prompt[:t] + [value] + prompt[t + 1:]
                expect_error(batches[:b] + [batch[:r] + [bad_prompt] + batch[r + 1:]] + batches[b + 1:],
                             f"第 {b} 批第 {r} 个提示的第 {t} 个 token 是 {value!r}")


def run(mod: object) -> None:
    require(mod, "prefill_costs")
    sys_prompt = [1, 2, 3, 4]
    for batches, page in (([[sys_prompt + [5, 6], sys_prompt + [7]], [sys_prompt + [8, 9]]], 1),
                          ([[sys_prompt + [5, 6]], [sys_prompt + [5, 6]]], 1),
                          ([[sys_prompt + [5, 6]], [sys_prompt + [5, 7]]], 4), ([], 1), ([[[7]], [[7]]], 1)):
        check_case(mod, batches, page, "题面里的例子" if batches else "没有批")
    rng = random.Random(SEED)
    for _ in range(150):
        batches, page = random_case(rng)
        check_case(mod, batches, page, "随机")
    check_bad_arguments(mod, random.Random(SEED + 1))


if __name__ == "__main__":
    main(run, prelude=ONLY_STDLIB)
