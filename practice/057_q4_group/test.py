"""练习 057 的评测：随机的组（各种量级、全是负数、全都相等、只有两种值、本来就落在刻度上的）和参考实现
比较 d、m、q，逐个检查误差不超过 d / 2；随机的行逐字节比较打包；坏参数每种都试。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import copy
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (CheckFailed, bad_int, check, check_equal, check_int_list, check_raises, check_type, main,
                      mistake_hint, require, seed, short, with_bad_item)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
GROUP = 32


# ---------------------------------------------------------------------------
# 参考实现：先排序找最小、最大，q 用 floor(t + 0.5)；t 离 .5 太近的位置两种取整都算对（浮点误差）
# ---------------------------------------------------------------------------


def ref_quantize(values):
    ordered = sorted(values)
    lo, hi = ordered[0], ordered[-1]
    d = (hi - lo) / 15
    q, either = [], []
    for i, w in enumerate(values):
        if d == 0:
            q.append(0)
            continue
        t = (w - lo) / d
        k = min(15, max(0, math.floor(t + 0.5)))
        q.append(k)
        if abs(t - math.floor(t) - 0.5) < 1e-6:  # 正好在两个刻度中间：round 和 floor(t + 0.5) 可能不同
            either.append(i)
    return d, lo, q, either


def ref_pack(q):
    half = len(q) // 2
    return bytes(q[j] + 16 * q[half + j] for j in range(half))


# ---------------------------------------------------------------------------
# 随机的组
# ---------------------------------------------------------------------------


def random_group(rng: random.Random) -> tuple[list[float], str]:
    kind = rng.choice(["uniform", "uniform", "negative", "constant", "two", "grid", "outlier", "huge", "tiny"])
    scale = rng.choice([1e-3, 0.05, 1.0, 7.0, 1e3])
    if kind == "uniform":
        values = [rng.uniform(-scale, scale) for _ in range(GROUP)]
    elif kind == "negative":
        values = [rng.uniform(-3 * scale, -scale) for _ in range(GROUP)]
    elif kind == "constant":
        values = [rng.choice([0.0, -scale, scale, rng.uniform(-scale, scale)])] * GROUP
    elif kind == "two":
        a, b = rng.uniform(-scale, scale), rng.uniform(-scale, scale)
        values = [rng.choice([a, b]) for _ in range(GROUP)]
    elif kind == "grid":  # 本来就落在刻度上（SmolLM2 的权重就是这样：从 Q4_1 解出来的）
        d, m = rng.choice([0.25, 0.125, 2.0, 0.0625]), rng.randint(-40, 40) * 0.125
        ks = [rng.randint(0, 15) for _ in range(GROUP - 2)] + [0, 15]
        rng.shuffle(ks)
        values = [m + d * k for k in ks]
    elif kind == "outlier":
        values = [rng.gauss(0, scale * 0.01) for _ in range(GROUP)]
        values[rng.randrange(GROUP)] = rng.choice([-1, 1]) * scale * 10
    elif kind == "huge":
        values = [rng.uniform(-1, 1) * 1e20 for _ in range(GROUP)]
    else:
        values = [rng.uniform(0, 1) * 1e-20 for _ in range(GROUP)]
    return values, kind


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def check_quantize(mod, values: list[float], kind: str) -> None:
    before = list(values)
    call = f"quantize_group({short(values, 90)})（{kind}）"
    try:
        got = mod.quantize_group(values)
    except ZeroDivisionError:
        raise CheckFailed(f"{call} 抛出了 ZeroDivisionError：这一组的数全都相等，d = 0。"
                          "除的时候用 max(d, 1e-30)，每个 q 都是 0") from None
    check_type(got, tuple, f"{call} 的返回值")
    check_equal(len(got), 3, f"{call} 返回的 tuple 的长度（d, m, q）")
    d, m, q = got
    check_type(d, float, f"{call} 返回的 d")
    check_type(m, float, f"{call} 返回的 m")
    check_int_list(q, f"{call} 返回的 q")
    check_equal(len(q), GROUP, f"{call} 返回的 q 的长度")
    check_equal(values, before, f"{call} 之后的 values（不该改动参数）")
    want_d, want_m, want_q, either = ref_quantize(values)
    hi = max(values)
    hits = []
    if want_d and math.isclose(d, max(abs(v) for v in values) / 15, rel_tol=1e-9) and not math.isclose(d, want_d):
        hits.append("d 用了最大绝对值 / 15：那是 int8 的（对称的）算法；int4 是 (最大值 - 最小值) / 15")
    if want_d and math.isclose(d, (hi - want_m) / 16, rel_tol=1e-9):
        hits.append("d 除以了 16：q 从 0 到 15 是 15 个刻度，d = (最大值 - 最小值) / 15")
    check_equal(m, want_m, f"{call} 返回的 m（这一组的最小值）")
    check(math.isclose(d, want_d, rel_tol=1e-12, abs_tol=0.0),
          f"{call} 返回的 d 不对：应该是 (最大值 - 最小值) / 15 = {want_d!r}，你的是 {d!r}" + mistake_hint(hits))
    for i, k in enumerate(q):
        check(0 <= k <= 15, f"{call} 返回的 q[{i}] = {k}，不在 [0, 15] 里")
    if want_d:
        trunc = [min(15, max(0, math.floor((w - want_m) / want_d))) for w in values]
        if q == trunc and q != want_q:
            hits.append("q 是截掉小数（int() 或 math.floor）得来的：要四舍五入（round），误差才不超过 d / 2")
    for i, (w, k, want) in enumerate(zip(values, q, want_q)):
        if k != want and not (i in either and abs(k - want) == 1):
            raise CheckFailed(
                f"{call} 返回的 q 不对：第一个不同在下标 {i}：w = {w!r}，(w - m) / d = {(w - want_m) / want_d:.4f}，"
                f"q 应该是 {want}，你的是 {k}" + mistake_hint(hits) + f"\n  应该是：{want_q}\n  你的是：{q}")
        error = abs(d * k + m - w)
        slack = 1e-9 * max(abs(v) for v in values)
        if error > want_d / 2 + slack:
            raise CheckFailed(f"{call}：第 {i} 个数 w = {w!r} 读回来是 d·q + m = {d * k + m!r}，"
                              f"误差 {error:.3g} 超过了半个刻度 d / 2 = {want_d / 2:.3g}" + mistake_hint(hits))


def check_dequantize(mod, rng: random.Random) -> None:
    d = rng.choice([0.0, rng.uniform(1e-4, 1.0), rng.uniform(1, 1e3)])
    m = rng.uniform(-50, 50)
    q = [rng.randint(0, 15) for _ in range(GROUP)]
    before = list(q)
    call = f"dequantize_group({d!r}, {m!r}, {short(q, 80)})"
    got = mod.dequantize_group(d, m, q)
    check_type(got, list, f"{call} 的返回值")
    check_equal(len(got), GROUP, f"{call} 的长度")
    for i, (value, k) in enumerate(zip(got, q)):
        check_type(value, float, f"{call} 的第 {i} 项")
        want = d * k + m
        check(math.isclose(value, want, rel_tol=1e-12, abs_tol=1e-12),
              f"{call} 的第 {i} 项不对：应该是 d·q + m = {want!r}，你的是 {value!r}")
    check_equal(q, before, f"{call} 之后的 q（不该改动参数）")


def check_round_trip(mod, values: list[float], kind: str) -> None:
    d, m, q = mod.quantize_group(values)
    back = mod.dequantize_group(d, m, q)
    want_d = ref_quantize(values)[0]
    for i, (w, r) in enumerate(zip(values, back)):
        check(abs(r - w) <= want_d / 2 + 1e-9 * max(abs(v) for v in values),
              f"dequantize_group(*quantize_group(values))（{kind}）的第 {i} 项是 {r!r}，原来是 {w!r}："
              f"误差超过了 d / 2 = {want_d / 2:.3g}")


def layout_hints(got: bytes, q: list[int]) -> list[str]:
    half = len(q) // 2
    hits = []
    if got == bytes(q[2 * j] | (q[2 * j + 1] << 4) for j in range(half)):
        hits.append("相邻的两个数装进了一个字节：本书的排法是第 j 个字节装第 j 个和第 j + K/2 个")
    llama = bytes(q[32 * (j // 16) + j % 16] | (q[32 * (j // 16) + j % 16 + 16] << 4) for j in range(half))
    if got == llama:
        hits.append("按 llama.cpp 的排法在每组 32 个数里排（低 4 位第 t 个、高 4 位第 t + 16 个）："
                    "本书是整行对半：第 j 个字节装第 j 个和第 j + K/2 个")
    if got == bytes((q[j] << 4) | q[j + half] for j in range(half)):
        hits.append("高低 4 位放反了：第 j 个数在低 4 位，第 j + K/2 个数在高 4 位")
    return hits


def check_pack(mod, rng: random.Random) -> None:
    K = 64 * rng.choice([1, 1, 2, 3, rng.randint(4, 12)])
    q = [rng.randint(0, 15) for _ in range(K)]
    if rng.random() < 0.2:
        q = [rng.choice([0, 15]) for _ in range(K)]
    before = list(q)
    call = f"pack_row({short(q, 80)})（K = {K}）"
    got = mod.pack_row(q)
    check_type(got, bytes, f"{call} 的返回值")
    want = ref_pack(q)
    check_equal(len(got), K // 2, f"{call} 的字节数")
    if got != want:
        i = next(j for j in range(K // 2) if got[j] != want[j])
        raise CheckFailed(f"{call} 不对：第一个不同在第 {i} 个字节：应该是 0x{want[i]:02x}"
                          f"（低 4 位 q[{i}] = {q[i]}，高 4 位 q[{i + K // 2}] = {q[i + K // 2]}），"
                          f"你的是 0x{got[i]:02x}" + mistake_hint(layout_hints(got, q)))
    check_equal(q, before, f"{call} 之后的 q（不该改动参数）")
    back = mod.unpack_row(want)
    check_int_list(back, f"unpack_row(pack_row(q))（K = {K}）的返回值")
    hits = []
    if back == [b >> 4 for b in want] + [b & 0xF for b in want]:
        hits.append("高低 4 位拆反了：低 4 位是前一半（第 j 个数），高 4 位是后一半（第 j + K/2 个数）")
    if back == [x for b in want for x in (b & 0xF, b >> 4)]:
        hits.append("拆出来的两个数挨着放了：先排完所有字节的低 4 位，再排高 4 位")
    check_equal(back, q, f"unpack_row(data)（应该拆回 q）", f"data 是 q 按本书的排法装成的 {K // 2} 个字节（K = {K}）"
                + mistake_hint(hits))


def check_bad_arguments(mod, rng: random.Random) -> None:
    for n in (0, GROUP - 1, GROUP + 1, 2 * GROUP, rng.randint(2, GROUP - 2)):
        values = [rng.uniform(-1, 1) for _ in range(n)]
        check_raises(ValueError, mod.quantize_group, values, what=f"quantize_group（{n} 个数）")

    def bad_nibble(_old, rng):
        return rng.choice([16, 16 + rng.randint(1, 300), bad_int(rng, 0), True, 3.0])

    q32 = [rng.randint(0, 15) for _ in range(GROUP)]
    check_raises(ValueError, mod.dequantize_group, 0.5, 0.0, q32[:-1], what="dequantize_group（q 只有 31 项）")
    for _ in range(3):
        bad = with_bad_item(rng, q32, bad_nibble)
        check_raises(ValueError, mod.dequantize_group, 0.5, 0.0, bad,
                     what=f"dequantize_group(0.5, 0.0, {short(bad, 80)})")
    for n in (0, 32, 96, 65, 130):
        check_raises(ValueError, mod.pack_row, [1] * n, what=f"pack_row（长度 {n}，不是 64 的正整数倍）")
    row = [rng.randint(0, 15) for _ in range(64 * rng.randint(1, 3))]
    for _ in range(3):
        bad = with_bad_item(rng, row, bad_nibble)
        check_raises(ValueError, mod.pack_row, copy.copy(bad), what=f"pack_row({short(bad, 80)})")
    for n in (0, 16, 31, 33, 48):
        check_raises(ValueError, mod.unpack_row, bytes(n), what=f"unpack_row（{n} 个字节，不是 32 的正整数倍）")


def run(mod: object) -> None:
    for name in ("quantize_group", "dequantize_group", "pack_row", "unpack_row"):
        require(mod, name)
    example = [-1.0 + 0.25 * (i % 16) for i in range(GROUP)]
    check_quantize(mod, example, "题面里的例子")
    check_equal(mod.quantize_group(example), (0.25, -1.0, [i % 16 for i in range(GROUP)]), "题面里的例子 quantize_group")
    check_quantize(mod, [0.7] * GROUP, "题面里的例子：全都相等")
    q = [1] * 32 + [2] * 32
    got = mod.pack_row(q)
    check_equal(got, bytes([0x21] * 32), "题面里的例子 pack_row([1] * 32 + [2] * 32)",
                "q = [1] * 32 + [2] * 32：第 j 个字节的低 4 位是 q[j] = 1，高 4 位是 q[j + 32] = 2，都是 0x21"
                + mistake_hint(layout_hints(got, q)))
    rng = random.Random(SEED)
    for _ in range(300):
        check_quantize(mod, *random_group(rng))
    for _ in range(40):
        check_round_trip(mod, *random_group(rng))
        check_dequantize(mod, rng)
    for _ in range(60):
        check_pack(mod, rng)
    check_bad_arguments(mod, random.Random(SEED + 1))


if __name__ == "__main__":
    main(run)
