"""练习 064 的评测：随机的请求（1 到 40 个；一段一个 token 的、几段里藏着两三个 token 的、只生成 1 个 token 的；
发出时刻随机），和参考实现比较摘要的每一项；查参数没被改动；坏参数每种都试。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import copy
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (ONLY_STDLIB, CheckFailed, check_equal, check_raises, check_type, in_child, kept_repr, main,
                      mistake_hint, require, seed, short)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
KEYS = ["requests", "output_tokens", "throughput", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms",
        "itl_p50_ms", "itl_p99_ms"]


# ---------------------------------------------------------------------------
# 参考实现（百分位用“最近的两个秩”插值的另一种写法）
# ---------------------------------------------------------------------------


def ref_pct(values, q):
    s = sorted(values)
    if len(s) == 1:
        return float(s[0])
    rank = q / 100 * (len(s) - 1)
    below = int(rank)
    if below >= len(s) - 1:
        return float(s[-1])
    return float(s[below] * (1 - (rank - below)) + s[below + 1] * (rank - below))


def metrics(traces, makespan, *, ttft="sent", tpot="tokens", itl="gaps", throughput="tokens", stat="pct", ms=True):
    ttfts, tpots, itls = [], [], []
    for t in traces:
        c, n = t["chunks"], t["output_tokens"]
        ttfts.append(c[0] - (t["sent"] if ttft == "sent" else 0.0))
        if tpot == "tokens" and n >= 2:
            tpots.append((c[-1] - c[0]) / (n - 1))
        elif tpot == "chunks" and len(c) >= 2:
            tpots.append((c[-1] - c[0]) / (len(c) - 1))
        elif tpot == "all_tokens" and n >= 2:
            tpots.append((c[-1] - c[0]) / n)
        gaps = [b - a for a, b in zip(c, c[1:])]
        itls += ([c[0] - t["sent"]] + gaps) if itl == "with_ttft" else gaps
    total = sum(t["output_tokens"] for t in traces)
    if throughput == "tokens":
        rate = total / makespan
    elif throughput == "chunks":
        rate = sum(len(t["chunks"]) for t in traces) / makespan
    else:  # 每个请求自己的用时加起来
        rate = total / sum(t["chunks"][-1] - t["sent"] for t in traces)
    out = {"requests": len(traces), "output_tokens": total, "throughput": rate}
    scale = 1000 if ms else 1
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls)):
        for q in (50, 99):
            if not values:
                out[f"{name}_p{q}_ms"] = None
            elif stat == "mean":
                out[f"{name}_p{q}_ms"] = sum(values) / len(values) * scale
            else:
                out[f"{name}_p{q}_ms"] = ref_pct(values, q) * scale
    return out


MISTAKES = [
    ("TPOT 除以了段数减一（也就是这个请求 ITL 的平均数）：一段里可能有几个 token，要除以 output_tokens − 1",
     dict(tpot="chunks")),
    ("TPOT 除以了 output_tokens：第一个 token 之后只有 output_tokens − 1 个 token", dict(tpot="all_tokens")),
    ("TTFT 从 0 算起了：要从这个请求自己的 sent 算起", dict(ttft="zero")),
    ("ITL 里混进了“发出 → 第一段”那一段：ITL 只算相邻两段文字之间的间隔", dict(itl="with_ttft")),
    ("吞吐数的是段数：要数 output_tokens", dict(throughput="chunks")),
    ("吞吐除以的是每个请求用时之和：要除以 makespan（请求是同时在跑的）", dict(throughput="durations")),
    ("P50 / P99 算成了平均数：要用 percentile", dict(stat="mean")),
    ("延迟没有换成毫秒：乘以 1000", dict(ms=False)),
]


def close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def hints(traces, makespan, key, got) -> str:
    want = metrics(traces, makespan)[key]
    hits = [text for text, opts in MISTAKES
            if close(metrics(traces, makespan, **opts)[key], got) and not close(want, got)]
    return mistake_hint(hits)


# ---------------------------------------------------------------------------
# 随机的请求
# ---------------------------------------------------------------------------


def random_trace(rng: random.Random, start: float, packed: float) -> dict:
    sent = start + rng.uniform(0, 3)
    tokens = rng.choice([1, 1, 2, rng.randint(2, 8), rng.randint(9, 60)])
    # 每段几个 token：大多是 1 个，packed 的比例有 2～3 个（半个字被扣住）
    sizes = []
    left = tokens
    while left:
        size = min(left, rng.choice([2, 3]) if rng.random() < packed else 1)
        sizes.append(size)
        left -= size
    t = sent + (0.0 if rng.random() < 0.1 else rng.uniform(0.01, 2.0))  # 有的第一段和发出同时到：TTFT = 0
    chunks = [round(t, 6)]
    for _ in sizes[1:]:
        t += rng.choice([rng.uniform(0.005, 0.08), rng.uniform(0.005, 0.08), rng.uniform(0.2, 1.5), 0.0])
        chunks.append(round(t, 6))
    return {"sent": round(sent, 6), "chunks": chunks, "output_tokens": tokens}


def random_case(rng: random.Random) -> tuple[list[dict], float]:
    n = rng.choice([1, 2, rng.randint(3, 10), rng.randint(11, 40)])
    packed = rng.choice([0.0, 0.3, 0.8])
    traces = [random_trace(rng, 0.0, packed) for _ in range(n)]
    if rng.random() < 0.15:  # 全都只生成 1 个 token：没有 TPOT、没有 ITL
        for t in traces:
            t["chunks"], t["output_tokens"] = t["chunks"][:1], 1
    end = max(t["chunks"][-1] for t in traces)
    return traces, end + rng.choice([0.0, rng.uniform(0.001, 0.5)])


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def check_case(mod, traces, makespan, kind: str) -> None:
    call = f"summarize({short(traces, 200)}, {makespan!r})（{kind}）"
    held = in_child(mod, copy.deepcopy(traces))
    try:
        got = mod.summarize(held, makespan)
    except ValueError as e:
        why = "，其中有请求的第一段和发出同时到（TTFT = 0，相等可以）" if any(t["chunks"][0] == t["sent"] for t in traces) else ""
        raise CheckFailed(f"{call} 是合法的输入{why}，你的代码却抛了 ValueError：{e}") from None
    check_type(got, dict, f"{call} 的返回值")
    check_equal(sorted(got), sorted(KEYS), f"{call} 返回的字典的键")
    want = metrics(traces, makespan)
    for key in KEYS:
        value = got[key]
        if key in ("requests", "output_tokens"):
            check_type(value, int, f"{call} 的 {key}")
            check_equal(value, want[key], f"{call} 的 {key}")
            continue
        if want[key] is None:
            if value is not None:
                raise CheckFailed(f"{call} 的 {key} 应该是 None（没有这一项的值），你的是 {value!r}")
            continue
        check_type(value, float, f"{call} 的 {key}")
        if not close(value, want[key]):
            raise CheckFailed(f"{call} 的 {key} 不对：应该是 {want[key]!r}，你的是 {value!r}"
                              + hints(traces, makespan, key, value))
    after = kept_repr(mod, held)
    if after != repr(traces):  # repr 分得出 1 和 1.0、列表和元组
        raise CheckFailed(f"{call} 改动了 traces：调用之后是 {short(after, 200)}（不该改动参数）")


def check_bad_arguments(mod, rng: random.Random) -> None:
    traces, makespan = random_case(rng)
    while len(traces) < 3 or all(len(t["chunks"]) < 3 for t in traces):
        traces, makespan = random_case(rng)
    long = next(i for i, t in enumerate(traces) if len(t["chunks"]) >= 3)

    def spoiled(i, change, what):
        bad = copy.deepcopy(traces)
        change(bad[i])
        check_raises(ValueError, mod.summarize, bad, makespan, what=f"summarize({short(bad, 150)}, {makespan!r})"
                                                                      f"（第 {i} 个请求{what}）")

    places = (0, rng.randrange(1, len(traces) - 1), len(traces) - 1)  # 坏的请求在开头、中间、末尾
    for i in places:
        for key in ("sent", "chunks", "output_tokens"):
            spoiled(i, lambda t, k=key: t.pop(k), f"少了 {key}")
        for value in ("0.5", True, None, math.nan, math.inf):
            spoiled(i, lambda t, v=value: t.update(sent=v), f"的 sent 是 {value!r}")
        spoiled(i, lambda t: t.update(chunks=[]), "的 chunks 是空的")
        spoiled(i, lambda t: t.update(chunks=tuple(t["chunks"])), "的 chunks 不是列表")
        spoiled(i, lambda t: t.update(chunks=[t["sent"] - 0.01] + t["chunks"][1:]), "的第一段早于 sent")
        for value in (None, True, 2.0, "3"):
            spoiled(i, lambda t, v=value: t.update(output_tokens=v), f"的 output_tokens 是 {value!r}")
        spoiled(i, lambda t: t.update(output_tokens=len(t["chunks"]) - 1), "的 output_tokens 比段数少")
    bad_traces = [copy.deepcopy(traces[0]), "请求"]
    check_raises(ValueError, mod.summarize, bad_traces, makespan, what="summarize([…, '请求'], …)（有一个请求不是字典）")
    # chunks 里坏的那一项、倒着走的那一对，在开头、中间、末尾都试
    n = len(traces[long]["chunks"])
    for j in (0, rng.randrange(1, n - 1), n - 1):
        for value in (None, "1.0", True, math.nan, math.inf):
            spoiled(long, lambda t, j=j, v=value: t["chunks"].__setitem__(j, v), f"的 chunks[{j}] 是 {value!r}")
    for j in (1, rng.randrange(1, n), n - 1):
        def backwards(t, j=j):
            t["chunks"][j] = t["chunks"][j - 1] - 0.01  # 第 j 段早于第 j − 1 段
        spoiled(long, backwards, f"的 chunks[{j}] 早于 chunks[{j - 1}]")
    for bad_makespan in (0, -1.0, True, "3", None, math.nan, math.inf,
                         max(t["chunks"][-1] for t in traces) - 0.001):
        check_raises(ValueError, mod.summarize, traces, bad_makespan, what=f"summarize(…, {bad_makespan!r})（makespan 不对）")
    for bad in ([], None, tuple(traces), "traces"):
        check_raises(ValueError, mod.summarize, bad, makespan, what=f"summarize({short(bad, 60)}, {makespan!r})")


def run(mod: object) -> None:
    require(mod, "summarize")
    example = [{"sent": 1.0, "chunks": [1.5, 1.6, 1.9, 2.0], "output_tokens": 5},
               {"sent": 0.0, "chunks": [0.2], "output_tokens": 1}]
    check_case(mod, example, 2.0, "题面里的例子")
    check_case(mod, [{"sent": 0.5, "chunks": [0.7, 0.9], "output_tokens": 2}], 1.0, "一个请求、两段")
    rng = random.Random(SEED)
    for _ in range(200):
        traces, makespan = random_case(rng)
        check_case(mod, traces, makespan, "随机")
    check_bad_arguments(mod, random.Random(SEED + 1))


if __name__ == "__main__":
    main(run, prelude=ONLY_STDLIB)
