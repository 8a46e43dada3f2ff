"""练习 063 的评测：随机的列表（长度 1 到 80；整数、小数、负数、大量重复；排好的、倒序的、乱序的）、
随机的 q，和参考实现（用分数精确地算）比较；查参数没被改动；坏参数每种都试。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import math
import random
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (ONLY_STDLIB, CheckFailed, check_raises, check_type, in_child, kept_repr, main, mistake_hint,
                      require, seed, short)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


# ---------------------------------------------------------------------------
# 参考实现：分数精确地算位置和插值，最后才变成 float
# ---------------------------------------------------------------------------


def ref_percentile(values, q) -> float:
    s = sorted(Fraction(v) for v in values)
    pos = Fraction(len(s) - 1) * Fraction(q) / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return float(s[lo] + (s[hi] - s[lo]) * (pos - lo))


# ---------------------------------------------------------------------------
# 常见错误：每一种照着算一遍，学习者的结果和哪几种一样，判词里就点出来
# ---------------------------------------------------------------------------


def _clip(i, n):
    return max(0, min(n - 1, i))


MISTAKES = [
    ("取的是 s[int(n·q/100)]（上游的做法）：不插值，位置也不对。位置是 (n − 1)·q/100，落在两个数之间要插值",
     lambda s, q: s[_clip(int(len(s) * q / 100), len(s))]),
    ("位置按 n·q/100 算了：q = 100 要落在最后一个数上，位置是 (n − 1)·q/100",
     lambda s, q: s[_clip(math.floor(len(s) * q / 100), len(s))] + (
         s[_clip(math.floor(len(s) * q / 100) + 1, len(s))] - s[_clip(math.floor(len(s) * q / 100), len(s))]) * (
         len(s) * q / 100 - math.floor(len(s) * q / 100)) if len(s) * q / 100 < len(s) - 1 else s[-1]),
    ("只取了 s[⌊pos⌋]，没有插值：pos 落在两个下标之间时，要按距离在两个数之间插值",
     lambda s, q: s[math.floor((len(s) - 1) * q / 100)]),
    ("取了离 pos 最近的那个数（四舍五入），没有插值", lambda s, q: s[round((len(s) - 1) * q / 100)]),
    ("取了 s[⌈pos⌉]，没有插值", lambda s, q: s[math.ceil((len(s) - 1) * q / 100)]),
]


def hints(values, q, got, want) -> str:
    hits = []
    s = sorted(values)
    for text, wrong in MISTAKES:
        w = float(wrong(s, q))
        if math.isclose(w, got, rel_tol=1e-9, abs_tol=1e-12) and not math.isclose(w, want, rel_tol=1e-9,
                                                                                  abs_tol=1e-12):
            hits.append(text)
    unsorted = list(values)
    pos = (len(unsorted) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(unsorted) - 1)
    w = unsorted[lo] + (unsorted[hi] - unsorted[lo]) * (pos - lo)
    if math.isclose(w, got, rel_tol=1e-9, abs_tol=1e-12) and not math.isclose(w, want, rel_tol=1e-9, abs_tol=1e-12):
        hits.append("没有先排序：按原来的顺序取了位置上的数。要先从小到大排好")
    return mistake_hint(hits)


# ---------------------------------------------------------------------------
# 随机的输入
# ---------------------------------------------------------------------------


def random_values(rng: random.Random) -> list:
    n = rng.choice([1, 2, 3, rng.randint(4, 12), rng.randint(13, 80)])
    kind = rng.choice(["int", "float", "mixed", "repeats", "latency"])
    if kind == "int":
        values = [rng.randint(-50, 50) for _ in range(n)]
    elif kind == "float":
        values = [rng.uniform(-1e3, 1e3) for _ in range(n)]
    elif kind == "mixed":
        values = [rng.randint(-5, 5) if rng.random() < 0.5 else rng.uniform(-5, 5) for _ in range(n)]
    elif kind == "repeats":
        pool = [rng.uniform(0, 10) for _ in range(rng.randint(1, 3))]
        values = [rng.choice(pool) for _ in range(n)]
    else:  # 像延迟：大多数小，少数很大
        values = [rng.expovariate(20) if rng.random() < 0.9 else rng.uniform(1, 5) for _ in range(n)]
    order = rng.choice(["shuffled", "sorted", "reversed"])
    if order == "sorted":
        values.sort()
    elif order == "reversed":
        values.sort(reverse=True)
    return values


def random_q(rng: random.Random):
    return rng.choice([0, 100, 50, 99, rng.randint(0, 100), rng.uniform(0, 100), rng.uniform(0, 100)])


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def check_case(mod, values, q) -> None:
    call = f"percentile({short(values, 160)}, {q!r})"
    held = in_child(mod, list(values))
    got = mod.percentile(held, q)
    check_type(got, float, f"{call} 的返回值")
    want = ref_percentile(values, q)
    if not math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12):
        n = len(values)
        pos = (n - 1) * q / 100
        raise CheckFailed(f"{call} 不对：排好是 {short(sorted(values), 120)}，位置 ({n} − 1)·{q!r}/100 = {pos:.6g}，"
                          f"应该是 {want!r}，你的是 {got!r}" + hints(values, q, got, want))
    after = kept_repr(mod, held)
    if after != repr(values):  # repr 分得出 1 和 1.0：把整数改成小数也是改动
        raise CheckFailed(f"{call} 改动了 values：调用之后是 {short(after, 160)}（不该改动参数）")


def check_bad_arguments(mod, rng: random.Random) -> None:
    values = random_values(rng)
    if len(values) < 3:
        values += [1.5, -2]
    q = random_q(rng)
    for bad in ([], tuple(values), "123", None, {1: 2}):  # 每一种都试
        check_raises(ValueError, mod.percentile, bad, q, what=f"percentile({short(bad, 80)}, {q!r})（values 不对）")
    bad_items = [True, "3", None, float("nan"), [1.0], Fraction(1, 3), Decimal("2.5")]
    for item in bad_items:
        for place in (0, rng.randrange(1, len(values) - 1), len(values) - 1):  # 开头、中间、末尾都试
            bad = values[:place] + [item] + values[place + 1:]
            check_raises(ValueError, mod.percentile, bad, 50,
                         what=f"percentile({short(bad, 100)}, 50)（第 {place} 项 {item!r} 不是 int 或 float）")
    for bad_q in (-0.5, -1, 100.0001, 101, rng.uniform(100.01, 1e4), -rng.uniform(0.01, 1e4), True, "50", None,
                  float("nan"), Fraction(1, 2), Decimal("50")):
        check_raises(ValueError, mod.percentile, values, bad_q, what=f"percentile({short(values, 80)}, {bad_q!r})（q 不对）")


def run(mod: object) -> None:
    require(mod, "percentile")
    for values, q in (([15, 20, 35, 40, 50], 40), ([3, 1, 2], 50), ([7.5], 99), ([1, 2, 3, 4], 100),
                      ([1, 2, 3, 4], 0), ([10, 0], 25)):
        check_case(mod, values, q)
    rng = random.Random(SEED)
    for _ in range(300):
        check_case(mod, random_values(rng), random_q(rng))
    check_bad_arguments(mod, random.Random(SEED + 1))


if __name__ == "__main__":
    main(run, prelude=ONLY_STDLIB)
