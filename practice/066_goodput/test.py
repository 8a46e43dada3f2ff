"""练习 066 的评测：随机的压测结果（1 到 8 个 rate、每个 1 到 60 个请求；延迟随 rate 变大、带噪声、有时不单调；
有 TPOT 是 None 的；正好等于目标的），和参考实现比较 goodput、max_rate；查参数没被改动；坏参数每种都试。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import copy
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (ONLY_STDLIB, CheckFailed, check_raises, check_type, in_child, kept_repr, main, mistake_hint,
                      require, seed, short)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


# ---------------------------------------------------------------------------
# 参考实现（百分位另写一遍：numpy 默认的线性插值）
# ---------------------------------------------------------------------------


def p99(values):
    s = sorted(values)
    rank = 0.99 * (len(s) - 1)
    lo = int(rank)
    return s[lo] if lo + 1 >= len(s) else s[lo] + (s[lo + 1] - s[lo]) * (rank - lo)


def ref_goodput(traces, makespan, ttft_slo, tpot_slo, *, none_fails=False, strict=False, ttft_only=False,
                fraction=False):
    def ok(x, slo):
        return x < slo if strict else x <= slo

    good = 0
    for t in traces:
        tpot_ok = (not none_fails) if t["tpot"] is None else ok(t["tpot"], tpot_slo)
        good += ok(t["ttft"], ttft_slo) and (ttft_only or tpot_ok)
    return good / (len(traces) if fraction else makespan)


def ref_max_rate(runs, ttft_slo, tpot_slo, *, stat="p99", contiguous=True, ttft_only=False):
    def meets(traces):
        ttfts = [t["ttft"] for t in traces]
        tpots = [t["tpot"] for t in traces if t["tpot"] is not None]
        pick = p99 if stat == "p99" else (lambda v: sum(v) / len(v)) if stat == "mean" else max
        return pick(ttfts) <= ttft_slo and (ttft_only or not tpots or pick(tpots) <= tpot_slo)

    best = None
    for rate in sorted(runs):
        if meets(runs[rate]):
            best = rate
        elif contiguous:
            break
    return best


GOODPUT_MISTAKES = [
    ("tpot 是 None 的请求被当成不满足了：只生成 1 个 token 的请求没有 TPOT，只看它的 TTFT", dict(none_fails=True)),
    ("正好等于目标的请求被当成不满足了：要用 ≤", dict(strict=True)),
    ("只看了 TTFT：两个目标要同时满足", dict(ttft_only=True)),
    ("除以的是请求数（满足的比例）：goodput 是每秒几个，要除以 makespan", dict(fraction=True)),
]
RATE_MISTAKES = [
    ("返回了达标的 rate 里最大的那个：要从最小的 rate 起连续达标，遇到第一个不达标的就停", dict(contiguous=False)),
    ("达标看的是平均数：要看 P99", dict(stat="mean")),
    ("达标看的是最大值：要看 P99（percentile(…, 99)）", dict(stat="max")),
    ("只看了 TTFT：P99 TPOT 也要不超过目标", dict(ttft_only=True)),
]


def close(a, b) -> bool:
    return a is b if a is None or b is None else math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


# ---------------------------------------------------------------------------
# 随机的压测结果
# ---------------------------------------------------------------------------


def random_traces(rng: random.Random, load: float, slo: tuple[float, float]) -> list[dict]:
    n = rng.choice([1, 2, rng.randint(3, 20), rng.randint(21, 60)])
    out = []
    for _ in range(n):
        ttft = rng.expovariate(1 / (0.2 + load)) if rng.random() < 0.9 else rng.uniform(0, 4 * (0.2 + load))
        tpot = None if rng.random() < 0.15 else rng.uniform(0.02, 0.05 + 0.1 * load)
        if rng.random() < 0.08:
            ttft = slo[0]  # 正好等于目标
        if tpot is not None and rng.random() < 0.08:
            tpot = slo[1]
        out.append({"ttft": round(ttft, 6), "tpot": None if tpot is None else round(tpot, 6)})
    return out


def random_runs(rng: random.Random, slo) -> dict:
    rates = sorted(rng.sample([0.5, 1, 2, 3, 4, 6, 8, 12, 16, 32], rng.randint(1, 8)))
    runs = {}
    for i, rate in enumerate(rates):
        load = i / max(1, len(rates) - 1) * rng.uniform(0.3, 3) + rng.uniform(-0.2, 0.2)  # 噪声：有时不单调
        runs[float(rate) if rng.random() < 0.5 else rate] = random_traces(rng, max(0.0, load), slo)
    return runs


def random_slo(rng: random.Random) -> tuple[float, float]:
    return rng.choice([0.5, 1.0, 2.0, rng.uniform(0.3, 3)]), rng.choice([0.05, 0.1, rng.uniform(0.03, 0.3)])


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def check_goodput(mod, traces, makespan, slo, kind) -> None:
    call = f"goodput({short(traces, 160)}, {makespan!r}, {slo[0]!r}, {slo[1]!r})（{kind}）"
    held = in_child(mod, copy.deepcopy(traces))
    got = mod.goodput(held, makespan, *slo)
    check_type(got, float, f"{call} 的返回值")
    want = ref_goodput(traces, makespan, *slo)
    if not close(float(got), want):
        hits = [t for t, o in GOODPUT_MISTAKES if close(ref_goodput(traces, makespan, *slo, **o), float(got))
                and not close(want, float(got))]
        raise CheckFailed(f"{call} 不对：应该是 {want!r}，你的是 {got!r}" + mistake_hint(hits))
    after = kept_repr(mod, held)
    if after != repr(traces):  # repr 分得出 1 和 1.0
        raise CheckFailed(f"{call} 改动了 traces：调用之后是 {short(after, 200)}（不该改动参数）")


def check_max_rate(mod, runs, slo, kind) -> None:
    call = f"max_rate({short(runs, 200)}, {slo[0]!r}, {slo[1]!r})（{kind}）"
    held = in_child(mod, copy.deepcopy(runs))
    got = mod.max_rate(held, *slo)
    want = ref_max_rate(runs, *slo)
    if got is not None:
        check_type(got, (int, float), f"{call} 的返回值")
    if not close(got, want):
        hits = [t for t, o in RATE_MISTAKES if close(ref_max_rate(runs, *slo, **o), got) and not close(want, got)]
        raise CheckFailed(f"{call} 不对：应该是 {want!r}，你的是 {got!r}" + mistake_hint(hits))
    if kept_repr(mod, held) != repr(runs):
        raise CheckFailed(f"{call} 改动了 runs：不该改动参数")


def check_bad_arguments(mod, rng: random.Random) -> None:
    slo = random_slo(rng)
    traces = random_traces(rng, 0.5, slo) + [{"ttft": 0.1, "tpot": 0.01}, {"ttft": 0.2, "tpot": None},
                                             {"ttft": 0.3, "tpot": 0.02}]
    rng.shuffle(traces)
    not_numbers = (True, "1", None, math.nan, math.inf, -math.inf)
    for bad in (0, -1.0) + not_numbers:  # 每一种都试
        for args in ((traces, bad, *slo), (traces, 2.0, bad, slo[1]), (traces, 2.0, slo[0], bad)):
            check_raises(ValueError, mod.goodput, *args, what=f"goodput(…, {args[1]!r}, {args[2]!r}, {args[3]!r})")
        check_raises(ValueError, mod.max_rate, {1.0: traces}, bad, slo[1], what=f"max_rate(…, {bad!r}, …)")
        check_raises(ValueError, mod.max_rate, {1.0: traces}, slo[0], bad, what=f"max_rate(…, …, {bad!r})")
        if bad is not None and not (isinstance(bad, float) and math.isnan(bad)):  # nan 和 None 当不了字典的键
            check_raises(ValueError, mod.max_rate, {0.5: traces, bad: traces}, *slo,
                         what=f"max_rate({{0.5: …, {bad!r}: …}}, …)（rate 不对）")
    spoils = [("不是字典", lambda t: "请求"), ("少了 tpot", lambda t: {"ttft": t["ttft"]}),
              ("少了 ttft", lambda t: {"tpot": t["tpot"]}), ("ttft 是负数", lambda t: {**t, "ttft": -0.1})]
    spoils += [(f"ttft 是 {v!r}", lambda t, v=v: {**t, "ttft": v}) for v in not_numbers]
    spoils += [("tpot 是负数", lambda t: {**t, "tpot": -0.01})]
    spoils += [(f"tpot 是 {v!r}", lambda t, v=v: {**t, "tpot": v}) for v in not_numbers if v is not None]
    for place in sorted({0, rng.randrange(len(traces)), len(traces) - 1}):  # 开头、中间、末尾
        for what, spoil in spoils:
            bad = traces[:place] + [spoil(traces[place])] + traces[place + 1:]
            check_raises(ValueError, mod.goodput, bad, 2.0, *slo, what=f"goodput(…)（第 {place} 个请求{what}）")
            check_raises(ValueError, mod.max_rate, {1.0: traces, 2.0: bad}, *slo,
                         what=f"max_rate(…)（rate 2.0 的 traces 里第 {place} 个请求{what}）")
    for bad in ([], None, tuple(traces), "traces"):
        check_raises(ValueError, mod.goodput, bad, 2.0, *slo, what=f"goodput({short(bad, 60)}, …)")
    for bad in ({}, None, [traces], {1.0: []}, {1.0: tuple(traces)}):
        check_raises(ValueError, mod.max_rate, bad, *slo, what=f"max_rate({short(bad, 60)}, …)")


def run(mod: object) -> None:
    for name in ("goodput", "max_rate"):
        require(mod, name)
    traces = [{"ttft": 0.4, "tpot": 0.05}, {"ttft": 1.5, "tpot": 0.05}, {"ttft": 0.9, "tpot": None},
              {"ttft": 0.2, "tpot": 0.3}]
    check_goodput(mod, traces, 2.0, (1.0, 0.1), "题面里的例子")
    runs = {1.0: [{"ttft": 0.3, "tpot": 0.05}] * 10, 2.0: [{"ttft": 0.5, "tpot": 0.06}] * 10,
            4.0: [{"ttft": 2.5, "tpot": 0.09}] * 10, 8.0: [{"ttft": 0.9, "tpot": 0.08}] * 10}
    check_max_rate(mod, runs, (1.0, 0.1), "题面里的例子")
    check_max_rate(mod, {2: [{"ttft": 3.0, "tpot": None}]}, (1.0, 0.1), "最小的 rate 就不达标")
    rng = random.Random(SEED)
    for _ in range(150):
        slo = random_slo(rng)
        traces = random_traces(rng, rng.uniform(0, 2), slo)
        end = max(t["ttft"] for t in traces) + rng.uniform(0.1, 10)
        check_goodput(mod, traces, end, slo, "随机")
    for _ in range(150):
        slo = random_slo(rng)
        check_max_rate(mod, random_runs(rng, slo), slo, "随机")
    check_bad_arguments(mod, random.Random(SEED + 1))


if __name__ == "__main__":
    main(run, prelude=ONLY_STDLIB)
