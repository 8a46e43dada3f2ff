"""练习 048 的评测：测试扮演环形网络，一步一步地在 n 个 rank 的生成器之间传消息。

每一步：收齐每个 rank yield 出来的那一块，逐条和参考的环形算法比较（发的是哪一块、多长、数值），
再把每条消息交给右邻居（gen.send）。有的轮次测试在路上给某条消息做个记号（加一个数），
结果必须把记号带上：它只能由收到的消息算出来。最后比较每个 rank 的结果和总和。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (
    bad_int,
    check,
    check_equal,
    check_int_list,
    check_type,
    main,
    mistake_hint,
    probe_bad_arguments,
    require,
    seed,
    short,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


# ---------------------------------------------------------------------------
# 参考实现：切块和环形算法的每一步（测试自己维护每个 rank 的缓冲区）
# ---------------------------------------------------------------------------


def ref_bounds(length: int, n: int) -> list[int]:
    return [i * length // n for i in range(n + 1)]


def send_chunk(rank: int, n: int, step: int) -> int:
    """第 step 步（0 起，共 2(n−1) 步）rank 发的是第几块。"""
    if step < n - 1:  # reduce-scatter
        return (rank - step) % n
    return (rank + 1 - (step - (n - 1))) % n  # all-gather


def recv_chunk(rank: int, n: int, step: int) -> int:
    """第 step 步 rank 收到的是第几块（就是左邻居发的那块）。"""
    return send_chunk((rank - 1) % n, n, step)


def same(a, b) -> bool:
    """两个数相等：整数要完全相等，浮点数允许最后几位的差别。"""
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def same_list(a: list, b: list) -> bool:
    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def span(lo: int, hi: int) -> str:
    return f"下标 {lo}–{hi - 1}，{hi - lo} 个数" if hi > lo else "空块，0 个数"


def phase(n: int, step: int) -> str:
    if step < n - 1:
        return f"reduce-scatter 的第 {step} 步"
    return f"all-gather 的第 {step - (n - 1)} 步"


# ---------------------------------------------------------------------------
# chunk_bounds
# ---------------------------------------------------------------------------


def check_bounds(mod, rng: random.Random) -> None:
    cases = [(10, 3), (4, 3), (2, 5), (0, 3), (7, 1), (8, 8)]
    cases += [(rng.randint(0, 40), rng.randint(1, 9)) for _ in range(30)]
    for length, n in cases:
        got = mod.chunk_bounds(length, n)
        what = f"chunk_bounds({length}, {n})"
        check_int_list(got, f"{what} 的返回值")
        want = ref_bounds(length, n)
        hits = []
        per = -(-length // n)
        if got == [min(i * per, length) for i in range(n + 1)]:
            hits.append("每块按 ceil(length / n) 切、最后几块变短：题目规定第 i 块从 i * length // n 开始，"
                        "各块长度最多差 1")
        elif got == [i * (length // n) for i in range(n)] + [length]:
            hits.append("每块 length // n 个、余数全给了最后一块：题目规定第 i 块从 i * length // n 开始")
        if got != want:
            check_equal(got, want, what + "（n + 1 个边界，第 i 个是 i * length // n）",
                        f"length = {length}，n = {n}" + mistake_hint(hits))
    good = dict(length=rng.randint(0, 20), n=rng.randint(1, 8))
    probe_bad_arguments(mod.chunk_bounds, good,
                        {"n": lambda r: r.choice([0, bad_int(r, 1)]), "length": lambda r: bad_int(r, 0)},
                        rng, name="chunk_bounds", tries=6)


# ---------------------------------------------------------------------------
# ring_all_reduce：测试当网络
# ---------------------------------------------------------------------------


def start(gen, rank: int, what: str):
    """第一次 next：拿到 rank 的第一条消息；生成器直接 return 了就是 (True, 返回值)。"""
    check(hasattr(gen, "send"),
          f"{what} 应该返回一个生成器（函数体里用 yield 发消息），你的返回了 {short(gen, 60)}。\n"
          "  每个 rank 只有自己的 data，别的 rank 的数据只能一步一步地从左邻居那里收到")
    try:
        return False, next(gen)
    except StopIteration as e:
        return True, e.value


def step_gen(gen, incoming: list):
    try:
        return False, gen.send(incoming)
    except StopIteration as e:
        return True, e.value


def number_types(values: list, ints: bool, what: str) -> None:
    kinds = (int,) if ints else (float,)
    for i, v in enumerate(values):
        if not isinstance(v, kinds) or isinstance(v, bool):
            want = "int（data 里都是整数）" if ints else "float（data 里都是浮点数）"
            check(False, f"{what} 的第 {i} 个元素应该是 {want}，你给的是 {type(v).__name__}：{short(v)}")


def check_message(msg, *, rank: int, n: int, step: int, buf: list, bounds: list[int], ints: bool,
                  last_in: list | None, rs_end: list | None, context: str) -> None:
    c = send_chunk(rank, n, step)
    lo, hi = bounds[c], bounds[c + 1]
    want = buf[lo:hi]
    right = (rank + 1) % n
    what = f"{phase(n, step)}（总第 {step} 步）rank {rank} 发给 rank {right} 的消息"
    check_type(msg, list, what + "（yield 出来的那一块）")
    length = bounds[-1]
    hits = []
    for j in range(n):
        other = buf[bounds[j]:bounds[j + 1]]
        if j != c and len(other) == len(msg) and all(isinstance(v, (int, float)) for v in msg) \
                and same_list(msg, other):
            hits.append(f"发成了第 {j} 块：{phase(n, step)} rank {rank} 该发第 {c} 块"
                        + ("（reduce-scatter 第 s 步发第 (rank − s) mod n 块）" if step < n - 1
                           else "（all-gather 第 s 步发第 (rank + 1 − s) mod n 块）"))
            break
    if len(msg) != len(want):
        if len(msg) > len(want):
            total = 2 * length - sum(bounds[j + 1] - bounds[j] for j in ((rank + 1) % n, (rank + 2) % n))
            check(False,
                  f"{what} 有 {len(msg)} 个数，可这一步只该发第 {c} 块（{span(lo, hi)}）。\n"
                  f"  环形 all-reduce 每一步只发一块：2(n−1) = {2 * (n - 1)} 步下来，rank {rank} 一共只发 {total} 个数，"
                  f"约是整条向量（{length} 个）的 2(n−1)/n = {2 * (n - 1)}/{n} 倍；整条整条地发，n 大了就慢 n/2 倍。\n"
                  f"  输入：{context}")
        check(False, f"{what} 有 {len(msg)} 个数，这一步该发第 {c} 块（{span(lo, hi)}；"
                     "块的边界见 chunk_bounds）。\n  输入：{context}" + mistake_hint(hits))
    number_types(msg, ints, what)
    if same_list(msg, want):
        return
    if step < n - 1 and last_in is not None and same_list(msg, last_in):
        hits.append("把上一步收到的那块原样转发了：收到的部分和要先加上自己 data 里的这一块")
    if rs_end is not None:
        added = [a + b for a, b in zip(rs_end[lo:hi], want)]
        if same_list(msg, added):
            hits.append("all-gather 阶段把收到的块加到了自己的缓冲区上：那块已经是完整的和，要覆盖（=），不是再加")
    check_equal(msg, want, f"{what}（第 {c} 块当前的值）", context + mistake_hint(hits))


def drive(mod, n: int, datas: list[list], marks: dict, context: str) -> list[list]:
    """跑一轮：n 个生成器，测试逐步传消息。marks：{(step, 发件的 rank): (块里的位置, 加上的数)}。"""
    length = len(datas[0])
    ints = all(isinstance(v, int) for d in datas for v in d)
    bounds = ref_bounds(length, n)
    steps = 2 * (n - 1)
    bufs = [list(d) for d in datas]  # 参考：每个 rank 此刻的缓冲区
    gens, outgoing, done, results = [], [], [], []
    for r in range(n):
        what = f"ring_all_reduce(rank={r}, n={n}, data=…)"
        gen = mod.ring_all_reduce(r, n, list(datas[r]))
        finished, value = start(gen, r, what)
        gens.append(gen)
        done.append(finished)
        outgoing.append(None if finished else value)
        results.append(value if finished else None)
    last_in: list = [None] * n
    rs_end = None
    sent = [0] * n
    for step in range(steps):
        for r in range(n):
            check(not done[r], f"rank {r} 只走了 {step} 步就 return 了：n = {n} 个 rank 要走 2(n−1) = {steps} 步"
                               f"（reduce-scatter、all-gather 各 {n - 1} 步）。\n  输入：{context}")
        if step == n - 1:
            rs_end = [list(b) for b in bufs]
        for r in range(n):
            check_message(outgoing[r], rank=r, n=n, step=step, buf=bufs[r], bounds=bounds, ints=ints,
                          last_in=last_in[r] if step < n - 1 else None,
                          rs_end=rs_end[r] if rs_end is not None and step > n - 1 else None, context=context)
            sent[r] += len(outgoing[r])
        # 网络：rank r 收到左邻居的那条；有记号的消息在路上被改了一个数
        delivered = [list(outgoing[(r - 1) % n]) for r in range(n)]
        for r in range(n):
            src = (r - 1) % n
            if (step, src) in marks:
                pos, delta = marks[(step, src)]
                delivered[r][pos] += delta
        for r in range(n):
            c = recv_chunk(r, n, step)
            lo, hi = bounds[c], bounds[c + 1]
            if step < n - 1:
                bufs[r][lo:hi] = [a + b for a, b in zip(bufs[r][lo:hi], delivered[r])]
            else:
                bufs[r][lo:hi] = list(delivered[r])
            last_in[r] = delivered[r]
        for r in range(n):
            finished, value = step_gen(gens[r], list(delivered[r]))
            done[r] = finished
            outgoing[r] = None if finished else value
            results[r] = value if finished else None
    for r in range(n):
        check(done[r], f"rank {r} 走完 2(n−1) = {steps} 步以后还在发消息（又 yield 了 {short(outgoing[r], 60)}）："
                       f"环形 all-reduce 一共只有 {steps} 步，最后一步收到最后一块就该 return 结果。\n  输入：{context}")
    for r in range(n):
        want_sent = 2 * length - sum(bounds[j + 1] - bounds[j] for j in ((r + 1) % n, (r + 2) % n)) if n > 1 else 0
        assert sent[r] == want_sent, (sent[r], want_sent)  # 每条消息都查过长度，这里只是确认
    return [results, bufs]


def check_results(results: list, bufs: list[list], datas: list[list], marks: dict, n: int, context: str) -> None:
    length = len(datas[0])
    ints = all(isinstance(v, int) for d in datas for v in d)
    plain = [sum(col) if ints else math.fsum(col) for col in zip(*datas)] if datas[0] else []
    for r, (got, want) in enumerate(zip(results, bufs)):
        what = f"rank {r} 的结果（ring_all_reduce 的返回值）"
        check_type(got, list, what)
        check(len(got) == length, f"{what} 应该有 {length} 个数，你的有 {len(got)} 个。\n  输入：{context}")
        number_types(got, ints, what)
        if same_list(got, want):
            continue
        if marks and same_list(got, plain):
            shown = "；".join(
                f"{phase(n, step)} rank {src} 发给 rank {(src + 1) % n} 的第 {send_chunk(src, n, step)} 块，"
                f"第 {pos} 个数加了 {delta}" for (step, src), (pos, delta) in marks.items())
            check(False,
                  f"{what} 里没有测试在路上做的记号（{shown}）：收到这条消息的 rank 算出来的和应该带着它，"
                  "你的结果却和没做记号时的总和一模一样。\n"
                  "  结果只能由自己的 data 和收到的消息算出来：不能绕过环形网络直接拿别的 rank 的数据"
                  f"（比如放在模块级的变量里）。\n  输入：{context}")
        check_equal(got, want, what, context)
    if not marks:
        for r in range(n):
            check(all(same(a, b) for a, b in zip(results[r], plain)),
                  f"rank {r} 的结果不等于所有 rank 的 data 逐元素之和。\n  输入：{context}")
            check(results[r] == results[0],
                  f"rank {r} 和 rank 0 的结果不是逐位相同：all-gather 阶段每一块都是从算好它的那个 rank 原样传过来的，"
                  f"所有 rank 应该拿到完全相同的数。\n  输入：{context}")


def random_data(rng: random.Random, n: int, length: int, ints: bool) -> list[list]:
    if ints:
        return [[rng.randint(-1000, 1000) for _ in range(length)] for _ in range(n)]
    return [[rng.uniform(-1, 1) * 10.0 ** rng.randint(-3, 3) for _ in range(length)] for _ in range(n)]


def random_length(rng: random.Random, n: int) -> int:
    kind = rng.randrange(5)
    if kind == 0:
        return rng.randint(0, max(0, n - 1))  # 比 n 短：有的块是空的
    if kind == 1:
        return n * rng.randint(1, 4)  # 正好整除
    if kind == 2:
        return n * rng.randint(1, 4) + rng.randint(1, max(1, n - 1))  # 不整除
    return rng.randint(1, 5 * n + 3)


def random_marks(rng: random.Random, n: int, length: int) -> dict:
    """1–2 条消息做记号：只挑非空的块。"""
    bounds = ref_bounds(length, n)
    choices = [(step, src) for step in range(2 * (n - 1)) for src in range(n)
               if bounds[send_chunk(src, n, step) + 1] > bounds[send_chunk(src, n, step)]]
    marks = {}
    for step, src in rng.sample(choices, min(len(choices), rng.randint(1, 2))):
        c = send_chunk(src, n, step)
        pos = rng.randrange(bounds[c + 1] - bounds[c])
        marks[(step, src)] = (pos, rng.choice([1, -1]) * rng.randint(10**6, 10**7))
    return marks


def trial(mod, rng: random.Random, n: int, length: int, ints: bool, marked: bool) -> None:
    datas = random_data(rng, n, length, ints)
    marks = random_marks(rng, n, length) if marked and n > 1 and length > 0 else {}
    if not ints:
        marks = {k: (pos, float(delta) + 0.5) for k, (pos, delta) in marks.items()}
    context = f"n = {n}，向量长 {length}，" + ("整数" if ints else "浮点数") + f"，各 rank 的 data = {short(datas, 200)}"
    results, bufs = drive(mod, n, datas, marks, context)
    check_results(results, bufs, datas, marks, n, context)


def check_bad_arguments(mod, rng: random.Random) -> None:
    def first_message(rank, n, data):  # 生成器的参数检查在第一次 next 时才运行也行
        gen = mod.ring_all_reduce(rank, n, data)
        return next(gen)

    for _ in range(2):
        n = rng.randint(2, 6)
        good = dict(rank=rng.randrange(n), n=n, data=[rng.randint(0, 9) for _ in range(rng.randint(1, 12))])
        bad = {"rank": lambda r: r.choice([-1, bad_int(r, 0), n, n + r.randint(1, 100)]),
               "n": lambda r: r.choice([0, bad_int(r, 1)])}
        probe_bad_arguments(first_message, good, bad, rng, name="ring_all_reduce", tries=4)


def run(mod: object) -> None:
    require(mod, "chunk_bounds")
    require(mod, "ring_all_reduce")
    rng = random.Random(SEED)
    check_bounds(mod, rng)

    # 先一个看得清的例子：3 个 rank，长 4（不整除：块长 1、1、2）
    datas = [[1, 2, 3, 4], [10, 20, 30, 40], [100, 200, 300, 400]]
    context = f"n = 3，各 rank 的 data = {datas}"
    results, bufs = drive(mod, 3, datas, {}, context)
    check_results(results, bufs, datas, {}, 3, context)

    plan = [(n, ints, marked) for n in range(1, 9) for ints in (True, False) for marked in (False, True)]
    plan += [(rng.randint(2, 8), rng.random() < 0.5, rng.random() < 0.5) for _ in range(16)]
    rng.shuffle(plan)
    for n, ints, marked in plan:
        trial(mod, rng, n, random_length(rng, n), ints, marked)
    # 比 n 短的向量、长度 0，带记号和不带
    for n in (rng.randint(3, 8), rng.randint(5, 8)):
        trial(mod, rng, n, rng.randint(1, n - 1), rng.random() < 0.5, True)
        trial(mod, rng, n, 0, True, False)
    check_bad_arguments(mod, rng)


if __name__ == "__main__":
    main(run)
