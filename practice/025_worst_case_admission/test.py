"""练习 025 的评测：题目里的例子、几千组随机的队列和池子（页数特意取在“恰好放得下”附近），
与独立写的参考实现比较；再查坏参数和“不改动传进来的列表”。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import copy
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import bad_int, check, check_equal, check_raises, check_type, main, mistake_hint, require, seed, with_bad_item

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


# ---------------------------------------------------------------------------
# 参考实现：逐个请求模拟“锁住、数页、不行就解锁”，页数用 token 数换算
# ---------------------------------------------------------------------------


def pages_for(tokens: int, page_size: int) -> int:
    """放下 tokens 个 token 要几页。"""
    return (tokens + page_size - 1) // page_size


def ref_admit(pending, running, page_size, free_pages, evictable, rows, budget,
              *, skip_running=False, whole_prompt=False, count_before_lock=False,
              keep_going=False, no_minus_one=False) -> int:
    """参考答案；关键字参数只用来给出“看起来你……”的提示。"""
    promised = 0
    if not skip_running:
        for cached, end in running:
            promised += pages_for(end - 1, page_size) - pages_for(cached, page_size)
    taken = 0
    for input_len, max_tokens, cached, lock in pending:
        if taken >= rows:
            break
        if taken and input_len - cached > budget:
            if keep_going:
                continue
            break
        last = input_len + max_tokens - (0 if no_minus_one else 1)
        need = pages_for(last, page_size) - (0 if whole_prompt else cached // page_size)
        locked_evictable = evictable - lock
        room = free_pages + (evictable if count_before_lock else locked_evictable)
        if need + promised > room:
            if keep_going:
                continue
            break
        evictable = locked_evictable
        budget -= input_len - cached
        promised += need
        taken += 1
    return taken


MISTAKES = {
    "skip_running": "忘了在跑的请求将来还要的页",
    "whole_prompt": "把命中的那段提示也算进了最坏情况（命中的页已经在池里）",
    "count_before_lock": "先数后锁：锁住之后，命中的页就不再能逐出了",
    "keep_going": "放不下时跳过去接着试了后面的请求：先到先得，第一个放不下的就停",
    "no_minus_one": "最坏情况多算了一个 token：最后采样出的 token 不进 KV 池，写到 input_len + max_tokens - 1 为止",
}


def describe(case) -> str:
    pending, running, kw = case
    return (f"admit(pending={pending}, running={running}, page_size={kw['page_size']}, "
            f"free_pages={kw['free_pages']}, evictable_pages={kw['evictable_pages']}, "
            f"free_rows={kw['free_rows']}, token_budget={kw['token_budget']})")


def ref_of(case, **mistake) -> int:
    pending, running, kw = case
    return ref_admit(pending, running, kw["page_size"], kw["free_pages"], kw["evictable_pages"],
                     kw["free_rows"], kw["token_budget"], **mistake)


def check_case(admit, case) -> None:
    pending, running, kw = case
    before = copy.deepcopy((pending, running))
    got = admit(pending, running, **kw)
    check_type(got, int, f"{describe(case)} 的返回值")
    want = ref_of(case)
    if got != want:
        hints = [text for flag, text in MISTAKES.items() if ref_of(case, **{flag: True}) == got]
        check(False, f"{describe(case)}\n  应该接纳 {want} 个，你的是 {got}{mistake_hint(hints)}")
    check_equal((pending, running), before, "调用者传进来的 pending / running（不应该被改动）",
                describe(case))


def random_case(rng: random.Random):
    ps = rng.choice([1, 2, 4, 8])
    running = []
    for _ in range(rng.randint(0, 4)):
        end = rng.randint(2, 60)
        running.append((rng.randint(0, end - 1), end))
    pending = []
    for _ in range(rng.randint(1, 6)):
        input_len = rng.randint(1, 40)
        cached = rng.randrange(0, input_len, ps) if rng.random() < 0.5 else 0
        lock = rng.randint(0, cached // ps)
        pending.append((input_len, rng.randint(1, 30), cached, lock))
    # 页数取在“恰好”附近：先数出全部接纳要多少页，再在它周围取
    total = sum(pages_for(e - 1, ps) - pages_for(c, ps) for c, e in running)
    total += sum(pages_for(i + m - 1, ps) - c // ps for i, m, c, _ in pending)
    evictable = rng.randint(0, 6)
    free = max(0, rng.randint(total // 3, total + 2) - evictable)
    kw = dict(page_size=ps, free_pages=free, evictable_pages=evictable,
              free_rows=rng.randint(1, 6), token_budget=rng.randint(0, 80))
    return pending, running, kw


def check_example(admit) -> None:
    case = ([(10, 8, 8, 2), (6, 20, 0, 0), (4, 4, 0, 0)], [(9, 20)],
            dict(page_size=4, free_pages=10, evictable_pages=4, free_rows=3, token_budget=100))
    check_case(admit, case)


def spoil_request(rng: random.Random, kind: str, ps: int):
    """一个坏的排队请求：kind 说明坏在哪里，坏值就在边界上或者远一些。"""
    input_len = rng.randint(2, 40)
    max_tokens = rng.randint(1, 30)
    cached = rng.randrange(0, input_len, ps)
    lock = rng.randint(0, cached // ps)
    if kind == "提示长度 < 1":
        input_len, cached, lock = bad_int(rng, 1), 0, 0
    elif kind == "max_tokens < 1":
        max_tokens = bad_int(rng, 1)
    elif kind == "cached_len 是负数（而且是整页）":
        cached, lock = -ps * rng.randint(1, 5), 0
    elif kind == "cached_len 不是整页":  # ps > 1
        cached = rng.randrange(0, input_len - 1, ps) + rng.randint(1, ps - 1)
        cached, lock = min(cached, input_len - 1), 0
    elif kind == "cached_len ≥ 提示长度":
        # 不小于提示长度的最小整页（提示是整页时就正好等于它：至少要算一个 token），或者更长
        cached = (input_len + ps - 1) // ps * ps + ps * rng.choice([0, 0, rng.randint(1, 3)])
        lock = 0
    elif kind == "lock_pages 是负数":
        lock = bad_int(rng, 0)
    elif kind == "lock_pages 比命中的页还多":
        lock = cached // ps + rng.choice([1, 1, rng.randint(2, 5)])
    return (input_len, max_tokens, cached, lock)


BAD_REQUESTS = ["提示长度 < 1", "max_tokens < 1", "cached_len 是负数（而且是整页）", "cached_len 不是整页",
                "cached_len ≥ 提示长度", "lock_pages 是负数", "lock_pages 比命中的页还多"]
BAD_COUNTS = ["free_pages", "evictable_pages", "free_rows", "token_budget"]


def check_bad_arguments(admit, rng: random.Random) -> None:
    """坏参数：坏的是哪一个、坏值是多少（就在边界上或者远一些）、坏请求排在队列的哪个位置，都随机。"""
    kinds = (["page_size"] + BAD_COUNTS + BAD_REQUESTS) * 5  # 每一种都查到，顺序随机
    rng.shuffle(kinds)
    for kind in kinds:
        pending, running, kw = random_case(rng)
        while kind == "cached_len 不是整页" and kw["page_size"] == 1:  # 页大小是 1 时什么长度都是整页
            pending, running, kw = random_case(rng)
        ps = kw["page_size"]
        if kind == "page_size":
            kw["page_size"] = bad_int(rng, 1)
            pending = [(i, m, 0, 0) for i, m, _, _ in pending]  # 其余都合法（cached_len = 0 对哪个页大小都是整页）
            why = f"page_size = {kw['page_size']}"
        elif kind in BAD_COUNTS:
            kw[kind] = bad_int(rng, 0)
            why = f"{kind} 是负数"
        else:
            bad = spoil_request(rng, kind, ps)
            pending = with_bad_item(rng, pending, lambda old, r: bad)
            why = f"第 {pending.index(bad)} 个排队请求 {bad}：{kind}"
        check_raises(ValueError, admit, pending, running, what=f"{describe((pending, running, kw))}（{why}）", **kw)


def run(mod) -> None:
    admit = require(mod, "admit")
    check_example(admit)
    rng = random.Random(SEED)
    for _ in range(3000):
        check_case(admit, random_case(rng))
    check_bad_arguments(admit, rng)


if __name__ == "__main__":
    main(run)
