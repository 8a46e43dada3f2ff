"""练习 059 的评测：随机形状、随机量级的权重（有整组相等的、全是负数的、本来就落在刻度上的、很大的）上
和参考实现比较 d、m、q，逐个检查误差不超过 d / 2，打包逐字节比较；解量化、线性层和参考结果比较；
在一块大的权重上记下 linear_int4 产生的每个中间张量，最大的不许超过 N·K 字节；坏参数每种都试。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)  # 张量都很小：单线程更快，也不和别的进程抢 CPU 核

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (CheckFailed, check, check_close, check_raises, check_tensor, main, mistake_hint, require, seed,
                      stage)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
GROUP = 32

# linear_int4 在你的进程里运行时，这段驱动记下它做的每个 torch 运算产生的张量有多大（aten 这一层用
# TorchDispatchMode，Python 调用的那一层用 TorchFunctionMode），以及有没有把数据交给 numpy / Python 列表。
# 它只记录，大小够不够小在评测进程里判断。
STAGE = """
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


def note(biggest, out, where):
    for t in tree_leaves(out):
        if isinstance(t, torch.Tensor) and t.untyped_storage().nbytes() > biggest[0]:
            biggest[:] = [t.untyped_storage().nbytes(), where, list(t.shape), str(t.dtype)]


class Sizes(TorchDispatchMode):  # aten 这一层：每个运算的结果
    def __init__(self, biggest):
        super().__init__()
        self.biggest = biggest

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        note(self.biggest, out, str(func))
        return out


class Names(TorchFunctionMode):  # Python 调用的那一层：每个 torch 函数和张量方法的名字和结果
    def __init__(self, biggest):
        super().__init__()
        self.biggest = biggest
        self.names = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        self.names.add(name)
        out = func(*args, **(kwargs or {}))
        note(self.biggest, out, name)
        return out


def measure(fn, *args):
    biggest = [0, "", [], ""]
    names, sizes = Names(biggest), Sizes(biggest)
    with names, sizes:
        out = fn(*args)
    return out, biggest, sorted(names.names)
"""


# ---------------------------------------------------------------------------
# 参考实现：float64 里逐组算；打包用乘法和加法（不用位运算）
# ---------------------------------------------------------------------------


def ref_quantize(w: torch.Tensor):
    """返回 (q [N, K] int64, d, m, 每个位置离“正好在两个刻度中间”有多远)。"""
    n, k = w.shape
    g = w.double().reshape(n, k // GROUP, GROUP)
    lo = g.min(dim=-1).values
    hi = g.max(dim=-1).values
    d = (hi - lo) / 15
    safe = torch.where(d > 0, d, torch.ones_like(d))
    t = (g - lo[..., None]) / safe[..., None]
    q = torch.floor(t + 0.5).clamp(0, 15)
    q = torch.where(d[..., None] > 0, q, torch.zeros_like(q)).long().reshape(n, k)
    tie = ((t - torch.floor(t)) - 0.5).abs().reshape(n, k)
    tie = torch.where((d > 0)[..., None].expand(n, k // GROUP, GROUP).reshape(n, k), tie, torch.ones_like(tie))
    return q, d.float(), lo.float(), tie


def ref_pack(q: torch.Tensor) -> torch.Tensor:
    half = q.shape[1] // 2
    return (q[:, :half] + 16 * q[:, half:]).to(torch.uint8)


def ref_unpack(packed: torch.Tensor) -> torch.Tensor:
    p = packed.long()
    return torch.cat([p % 16, p // 16], dim=1)


def ref_dequantize(packed, d, m) -> torch.Tensor:
    q = ref_unpack(packed).double()
    n, k = q.shape
    w = q.reshape(n, k // GROUP, GROUP) * d.double()[..., None] + m.double()[..., None]
    return w.reshape(n, k)


# ---------------------------------------------------------------------------
# 随机的权重：一组一组造，每组一种
# ---------------------------------------------------------------------------

KINDS = ("normal", "normal", "negative", "constant", "grid", "outlier", "huge", "tiny")


def random_weight(rng: random.Random, gen: torch.Generator, n: int, k: int) -> torch.Tensor:
    w = torch.empty(n, k // GROUP, GROUP)
    for i in range(n):
        for j in range(k // GROUP):
            kind = rng.choice(KINDS)
            scale = rng.choice([1e-3, 0.02, 1.0, 50.0])
            if kind == "normal":
                w[i, j] = torch.randn(GROUP, generator=gen) * scale
            elif kind == "negative":
                w[i, j] = -scale - torch.rand(GROUP, generator=gen) * 2 * scale
            elif kind == "constant":
                w[i, j] = rng.choice([0.0, -scale, scale])
            elif kind == "grid":  # 本来就落在刻度上：和 SmolLM2 的权重（从 Q4_1 解出来的）一样
                step, base = rng.choice([0.25, 0.125, 2.0]), rng.randint(-40, 40) * 0.125
                ks = torch.randint(0, 16, (GROUP,), generator=gen)
                ks[rng.randrange(GROUP)], ks[rng.randrange(GROUP)] = 0, 15
                w[i, j] = base + step * ks.float()
            elif kind == "outlier":
                w[i, j] = torch.randn(GROUP, generator=gen) * scale * 0.01
                w[i, j, rng.randrange(GROUP)] = rng.choice([-10.0, 10.0]) * scale
            elif kind == "huge":
                w[i, j] = torch.randn(GROUP, generator=gen) * 1e30
            else:
                w[i, j] = torch.rand(GROUP, generator=gen) * 1e-20
    return w.reshape(n, k)


def layout_hints(packed: torch.Tensor, q: torch.Tensor) -> list[str]:
    n, k = q.shape
    hits = []
    if torch.equal(packed, (q[:, 0::2] + 16 * q[:, 1::2]).to(torch.uint8)):
        hits.append("相邻的两个数装进了一个字节：本书的排法是第 j 个字节装第 j 个和第 j + K/2 个")
    blocks = q.reshape(n, k // GROUP, 2, 16)
    if torch.equal(packed, (blocks[:, :, 0] + 16 * blocks[:, :, 1]).reshape(n, k // 2).to(torch.uint8)):
        hits.append("按 llama.cpp 的排法在每组 32 个数里排（低 4 位第 t 个、高 4 位第 t + 16 个）："
                    "本书是整行对半：第 j 个字节装第 j 个和第 j + K/2 个")
    if torch.equal(packed, (16 * q[:, : k // 2] + q[:, k // 2:]).to(torch.uint8)):
        hits.append("高低 4 位放反了：第 j 个数在低 4 位，第 j + K/2 个数在高 4 位")
    return hits


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def check_quantize(mod, w: torch.Tensor, what: str, exact: bool = False) -> tuple:
    n, k = w.shape
    before = w.clone()
    got = mod.quantize_int4(w)
    check(isinstance(got, tuple) and len(got) == 3, f"{what}：quantize_int4 要返回 (packed, d, m) 三个张量")
    packed, d, m = got
    check_tensor(packed, f"{what} 的 packed", shape=(n, k // 2), dtype=torch.uint8)
    check_tensor(d, f"{what} 的 d", shape=(n, k // GROUP), dtype=torch.float32)
    check_tensor(m, f"{what} 的 m", shape=(n, k // GROUP), dtype=torch.float32)
    for name, t in (("packed", packed), ("d", d), ("m", m)):
        check(t.is_contiguous(), f"{what} 的 {name} 不是连续的：C++ 算子按连续的内存读，返回前 .contiguous()")
    check(torch.equal(w, before), f"{what}：quantize_int4 改动了传进来的 w")
    want_q, want_d, want_m, tie = ref_quantize(w)
    check(torch.equal(m, want_m), f"{what} 的 m 不对：每组的 m 是这一组的最小值" + first_diff(m, want_m))
    hits = []
    if torch.allclose(d, w.reshape(n, -1, GROUP).abs().amax(-1) / 15) and not torch.allclose(d, want_d):
        hits.append("d 用了最大绝对值 / 15：那是 int8 的（对称的）算法；int4 是 (最大值 - 最小值) / 15")
    if torch.allclose(d, want_d * 15 / 16) and not torch.allclose(d, want_d):
        hits.append("d 除以了 16：q 从 0 到 15 是 15 个刻度，d = (最大值 - 最小值) / 15")
    close_or_hint(d, want_d, f"{what} 的 d（(最大值 - 最小值) / 15）", hits, atol=0, rtol=1e-6)
    q = ref_unpack(packed)  # 按本书的排法拆你的字节
    if exact or not torch.equal(q, want_q):
        hits = layout_hints(packed, want_q)
        if not hits:
            g = w.double().reshape(n, -1, GROUP)
            t = (g - want_m.double()[..., None]) / want_d.double().clamp_min(1e-300)[..., None]
            trunc = torch.floor(t).clamp(0, 15).long().reshape(n, k)
            if float((q == trunc).double().mean()) > 0.95:  # float32 里算的 t 落在整数边上时，截断可能差 1
                hits.append("q 是截掉小数得来的（.long()、.to(torch.uint8) 或 floor 都是截断）：先 torch.round 再转整数")
        if exact:
            check(torch.equal(packed, ref_pack(want_q)),
                  f"{what}：权重本来就落在刻度上，q 没有取整的余地，packed 应该逐字节等于参考结果" + first_diff(packed, ref_pack(want_q))
                  + mistake_hint(hits))
        bad = (q != want_q) & ~((tie < 1e-3) & ((q - want_q).abs() == 1))
        if bool(bad.any()):
            i, j = (int(v) for v in bad.nonzero()[0])
            raise CheckFailed(
                f"{what}：按本书的排法拆开你的 packed，第 {i} 行第 {j} 个数（w = {float(w[i, j])!r}）的 q 应该是 "
                f"{int(want_q[i, j])}，你的是 {int(q[i, j])}（第 {j % (k // 2)} 个字节的"
                f"{'低' if j < k // 2 else '高'} 4 位）" + mistake_hint(hits))
    back = q.double().reshape(n, -1, GROUP) * d.double()[..., None] + m.double()[..., None]
    err = (back.reshape(n, k) - w.double()).abs()
    bound = (want_d.double() / 2)[..., None].expand(n, k // GROUP, GROUP).reshape(n, k)
    slack = 1e-6 * w.double().abs().reshape(n, -1, GROUP).amax(-1)[..., None].expand(n, k // GROUP, GROUP).reshape(n, k)
    over = err > bound + slack
    if bool(over.any()):
        i, j = (int(v) for v in over.nonzero()[0])
        raise CheckFailed(f"{what}：第 {i} 行第 {j} 个数 w = {float(w[i, j])!r} 读回来是 {float(back.reshape(n, k)[i, j])!r}，"
                          f"误差 {float(err[i, j]):.3g} 超过了半个刻度 d / 2 = {float(bound[i, j]):.3g}")
    return packed, d, m


def close_or_hint(got, want, what: str, hits: list[str], *, atol: float, rtol: float) -> None:
    """check_close，没通过时在消息后面加上“看起来是哪种常见错误”。"""
    try:
        check_close(got, want, what, atol=atol, rtol=rtol)
    except CheckFailed as e:
        raise CheckFailed(str(e) + mistake_hint(hits)) from None


def first_diff(a: torch.Tensor, b: torch.Tensor) -> str:
    diff = (a != b).nonzero()
    if len(diff) == 0:
        return ""
    idx = tuple(int(v) for v in diff[0])
    return f"\n  比如下标 {idx}：应该是 {b[idx].item()!r}，你的是 {a[idx].item()!r}"


def check_dequantize(mod, rng: random.Random, gen: torch.Generator) -> None:
    n, k = rng.randint(1, 40), 64 * rng.randint(1, 6)
    packed = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=gen)
    d = torch.rand(n, k // GROUP, generator=gen) * rng.choice([1e-3, 1.0, 100.0])
    d[torch.rand(n, k // GROUP, generator=gen) < 0.1] = 0.0  # 有的组全都相等
    m = torch.randn(n, k // GROUP, generator=gen) * rng.choice([0.01, 1.0, 100.0])
    what = f"dequantize_int4（N = {n}，K = {k}）"
    got = mod.dequantize_int4(packed, d, m)
    want = ref_dequantize(packed, d, m)
    check_tensor(got, what, shape=(n, k), dtype=torch.float32)
    hits = []
    q = ref_unpack(packed).double()
    by_repeat = torch.arange(k) % (k // GROUP)  # d.repeat(1, 32)：第 j 个数用到的是 d[:, j % (K/32)]
    if torch.allclose(got.double(), q * d.double()[:, by_repeat] + m.double()[:, by_repeat], rtol=1e-5, atol=1e-5):
        hits.append("d、m 展开成 [N, K] 时用了 repeat：它把整行重复 32 遍；要每个数重复 32 遍，用 repeat_interleave")
    swapped = ref_dequantize(((packed & 0xF) << 4) | (packed >> 4), d, m)
    if torch.allclose(got.double(), swapped, rtol=1e-5, atol=1e-5):
        hits.append("高低 4 位拆反了：低 4 位是前一半（第 j 个数），高 4 位是后一半（第 j + K/2 个数）")
    close_or_hint(got, want.float(), what, hits, atol=1e-5 * float(want.abs().max()) + 1e-6, rtol=1e-6)


def reference_linear(x, packed, d, m) -> torch.Tensor:
    return (x.double() @ ref_dequantize(packed, d, m).T).float()


def check_linear(mod, x, packed, d, m, what: str) -> None:
    n, mm = packed.shape[0], x.shape[0]
    got = mod.linear_int4(x, packed, d, m)
    want = reference_linear(x, packed, d, m)
    scale = float((x.double().abs() @ ref_dequantize(packed, d, m).abs().T).max())
    check_tensor(got, what, shape=(mm, n), dtype=torch.float32)
    check_close(got, want, what, atol=1e-5 * scale + 1e-6, rtol=1e-4)


def random_linear_case(rng: random.Random, gen: torch.Generator):
    n, k, mm = rng.randint(1, 48), 64 * rng.randint(1, 6), rng.choice([rng.randint(1, 8), rng.randint(9, 40)])
    if rng.random() < 0.5:
        packed, d, m = ref_quantized(random_weight(rng, gen, n, k))
    else:
        packed = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=gen)
        d = torch.rand(n, k // GROUP, generator=gen)
        m = -torch.rand(n, k // GROUP, generator=gen)
    x = torch.randn(mm, k, generator=gen) * rng.choice([0.1, 1.0, 10.0])
    if rng.random() < 0.3:  # 不连续的 x：更宽的张量里切出来的
        x = torch.randn(mm, k + 64, generator=gen)[:, 32: 32 + k]
    return x, packed, d, m


def ref_quantized(w: torch.Tensor):
    q, d, m, _ = ref_quantize(w)
    return ref_pack(q), d, m


def check_memory(mod, kit, rng: random.Random, gen: torch.Generator) -> None:
    """linear_int4 不许先把整块权重解成 [N, K]：它产生的每个张量都不超过 N·K 字节。"""
    # 第二块的 x 超过 8 行；行数不超过 N/4，x 自己（4·M·K 字节）才在 N·K 之内
    for n, k, mm in ((256, 2048, rng.randint(1, 8)), (rng.randint(64, 320), 1024 * rng.randint(1, 3), rng.randint(9, 16))):
        packed, d, m = ref_quantized(torch.randn(n, k, generator=gen) * 0.05)
        x = torch.randn(mm, k, generator=gen)
        what = f"linear_int4（x [{mm}, {k}]，N = {n}）"
        got, (nbytes, op, shape, dtype), names = kit.measure(mod.linear_int4, x, packed, d, m)
        bad = sorted(set(names) & {"numpy", "tolist", "__array__"})
        check(not bad, f"{what} 调用了 {', '.join(bad)}：数据要留在 torch 的张量里（这道题量的是 torch 运算的中间张量）")
        check(nbytes <= n * k,
              f"{what} 造出了一个 {nbytes} 字节的张量（{op} 的结果，形状 {shape}，{dtype}），超过了 N·K = {n * k} 字节："
              f"不要先把整块权重解成 [N, K]（float32 的整块是 {4 * n * k} 字节）。按组循环，一次只解 [N, 32]，"
              "或者一次只解几行")
        check_tensor(got, what, shape=(mm, n), dtype=torch.float32)
        want = reference_linear(x, packed, d, m)
        scale = float((x.double().abs() @ ref_dequantize(packed, d, m).abs().T).max())
        check_close(got, want, what, atol=1e-5 * scale + 1e-6, rtol=1e-4)


def check_bad_arguments(mod, rng: random.Random, gen: torch.Generator) -> None:
    n, k = rng.randint(2, 10), 64 * rng.randint(1, 3)
    w = torch.randn(n, k, generator=gen)
    for why, bad in (("一维的 w", w[0]), ("K = 32，不是 64 的倍数", w[:, :32]),
                     ("K = 96，不是 64 的倍数", torch.randn(n, 96, generator=gen)), ("w 是 float64", w.double())):
        check_raises(ValueError, mod.quantize_int4, bad, what=f"quantize_int4（{why}）")
    packed, d, m = ref_quantized(w)
    x = torch.randn(rng.randint(1, 8), k, generator=gen)
    weight_cases = [
        ("packed 是 int8", (packed.to(torch.int8), d, m)),
        ("d 的形状不对", (packed, d[:, :-1], m)),
        ("m 的形状不对", (packed, d, m[:-1])),
        ("d 是 float64", (packed, d.double(), m)),
    ]
    for why, args in weight_cases:
        check_raises(ValueError, mod.dequantize_int4, *args, what=f"dequantize_int4（{why}）")
        check_raises(ValueError, mod.linear_int4, x, *args, what=f"linear_int4（{why}）")
    x_cases = [
        ("x 有 0 行", torch.randn(0, k, generator=gen)),
        ("x 是一维的", x[0]),
        ("x 的列数不是 K", torch.randn(x.shape[0], k + 64, generator=gen)),
        ("x 是 float64", x.double()),
    ]
    for why, bad in x_cases:
        check_raises(ValueError, mod.linear_int4, bad, packed, d, m, what=f"linear_int4（{why}）")


def run(mod: object) -> None:
    for name in ("quantize_int4", "dequantize_int4", "linear_int4"):
        require(mod, name)
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)
    # 落在刻度上的权重：q 没有取整的余地，打包必须逐字节一样
    step = torch.tensor([0.25, 0.5, 2.0, 0.125])[torch.randint(0, 4, (4, 4), generator=gen)]
    ks = torch.randint(0, 16, (4, 4, GROUP), generator=gen)
    ks[..., 0], ks[..., 1] = 0, 15
    grid = (torch.randint(-8, 8, (4, 4, 1), generator=gen) * 0.5 + step[..., None] * ks).reshape(4, 128)
    check_quantize(mod, grid, "quantize_int4（4 行、K = 128，每组都落在刻度上）", exact=True)
    for _ in range(12):
        n, k = rng.randint(1, 24), 64 * rng.choice([1, 1, 2, 3, 4, 8])
        check_quantize(mod, random_weight(rng, gen, n, k), f"quantize_int4（N = {n}，K = {k}）")
    for _ in range(10):
        check_dequantize(mod, rng, gen)
    for i in range(20):
        x, packed, d, m = random_linear_case(rng, gen)
        check_linear(mod, x, packed, d, m, f"linear_int4（x [{x.shape[0]}, {x.shape[1]}]，N = {packed.shape[0]}）")
    check_memory(mod, stage(mod, STAGE), rng, gen)
    check_bad_arguments(mod, random.Random(SEED + 1), torch.Generator().manual_seed(SEED + 1))


if __name__ == "__main__":
    main(run)
