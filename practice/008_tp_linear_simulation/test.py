"""练习 008 的评测：每个 rank 的切片、每个 rank 的部分和、以及加起来等于不切的 MLP。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)  # 张量都很小：单线程更快，也不和别的进程抢 CPU 核

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (
    seed,
    CheckFailed,
    bad_int,
    probe_bad_arguments,
    check,
    check_close,
    check_tensor,
    main,
    require,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


# ---------------------------------------------------------------------------
# 参考实现：不切片。第 i 个（行 / 列 / 中间单元）属于 rank i * size // n，
# 用布尔掩码挑出属于某个 rank 的部分；部分和 = 把不属于这个 rank 的中间单元置零后的完整 MLP。
# ---------------------------------------------------------------------------


def owner_mask(n: int, rank: int, size: int) -> torch.Tensor:
    return torch.tensor([i * size // n == rank for i in range(n)])


def ref_column(weight: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    return weight[owner_mask(weight.shape[0], rank, size)]


def ref_row(weight: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    return weight.T[owner_mask(weight.shape[1], rank, size)].T


def ref_gate_up(gate, up, rank, size):
    return torch.cat([ref_column(gate, rank, size), ref_column(up, rank, size)])


def silu64(t: torch.Tensor) -> torch.Tensor:
    return t / (1.0 + torch.exp(-t))


def ref_mlp(x, gate, up, down, keep: torch.Tensor | None = None) -> torch.Tensor:
    """float64 的完整 MLP；keep 给出时，只保留 keep 为 True 的中间单元（一个 rank 的部分和）。"""
    x, gate, up, down = (t.double() for t in (x, gate, up, down))
    act = silu64(x @ gate.T) * (x @ up.T)  # [T, inter]
    if keep is not None:
        act = act * keep.double()
    return act @ down.T


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    return (1e-10, 1e-10) if dtype == torch.float64 else (2e-4, 2e-4)


def random_mlp(gen, tokens, hidden, inter, dtype):
    def rnd(*shape):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) / 4).to(dtype)

    return rnd(tokens, hidden), rnd(inter, hidden), rnd(inter, hidden), rnd(hidden, inter)


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def first_bad_index(got: torch.Tensor, want: torch.Tensor, dim: int) -> int:
    other = 1 - dim
    return int((got != want).any(dim=other).nonzero()[0])


def check_shards(mod, weight: torch.Tensor, size: int) -> None:
    out_dim, in_dim = weight.shape
    original = weight.clone()
    for rank in range(size):
        call = f"column_shard(weight{tuple(weight.shape)}, rank={rank}, size={size})"
        got = mod.column_shard(weight, rank, size)
        check_tensor(got, f"{call} 的返回值", shape=(out_dim // size, in_dim), dtype=weight.dtype)
        want = ref_column(weight, rank, size)
        if not torch.equal(got, want):
            i = first_bad_index(got, want, 0)
            check(
                False,
                f"{call} 取错了行：它应该是 weight 的第 {rank * out_dim // size}–"
                f"{(rank + 1) * out_dim // size - 1} 行（列并行切 weight 的第 0 维），"
                f"你返回的第 {i} 行不是 weight 的第 {rank * out_dim // size + i} 行",
            )

        call = f"row_shard(weight{tuple(weight.shape)}, rank={rank}, size={size})"
        got = mod.row_shard(weight, rank, size)
        try:
            check_tensor(
                got, f"{call} 的返回值", shape=(out_dim, in_dim // size), dtype=weight.dtype
            )
        except CheckFailed as e:
            extra = ""
            if isinstance(got, torch.Tensor) and tuple(got.shape) == (out_dim // size, in_dim):
                extra = "\n  你切的是第 0 维；行并行切的是输入维，也就是 weight 的第 1 维"
            raise CheckFailed(f"{e}{extra}") from None
        check(got.is_contiguous(), f"{call} 的返回值应该是连续（contiguous）的张量")
        want = ref_row(weight, rank, size)
        if not torch.equal(got, want):
            j = first_bad_index(got, want, 1)
            check(
                False,
                f"{call} 取错了列：你返回的第 {j} 列应该是 weight 的第 {rank * in_dim // size + j} 列",
            )
    check(torch.equal(weight, original), "column_shard / row_shard 改动了传进来的 weight")


def check_gate_up(mod, gate, up, size) -> None:
    inter, hidden = gate.shape
    for rank in range(size):
        call = (
            f"gate_up_shard(gate{tuple(gate.shape)}, up{tuple(up.shape)}, rank={rank}, size={size})"
        )
        got = mod.gate_up_shard(gate, up, rank, size)
        check_tensor(got, f"{call} 的返回值", shape=(2 * inter // size, hidden), dtype=gate.dtype)
        want = ref_gate_up(gate, up, rank, size)
        if torch.equal(got, want):
            continue
        extra = ""
        wrong = ref_column(torch.cat([gate, up]), rank, size)
        if torch.equal(got, wrong):
            extra = (
                "\n  你把完整的 gate、up 先拼起来再切了：那样 rank 0 拿到的全是 gate。"
                "要先各自切出第 rank 段，再拼起来"
            )
        elif torch.equal(
            got, torch.cat([ref_column(up, rank, size), ref_column(gate, rank, size)])
        ):
            extra = "\n  顺序反了：gate 的那段在上，up 的那段在下"
        check(False, f"{call} 不对：应该是 gate 的第 {rank} 段行接上 up 的第 {rank} 段行{extra}")


def check_rank_mlp(mod, x, gate, up, down, size) -> None:
    inter = gate.shape[0]
    context = f"x{tuple(x.shape)}、gate/up{tuple(gate.shape)}、down{tuple(down.shape)}、{x.dtype}，size={size}"
    full = ref_mlp(x, gate, up, down)
    atol, rtol = tolerance(x.dtype)
    for rank in range(size):
        gu, d = ref_gate_up(gate, up, rank, size), ref_row(down, rank, size)
        call = f"rank_mlp(x, gate_up_local{tuple(gu.shape)}, down_local{tuple(d.shape)})（rank {rank}）"
        got = mod.rank_mlp(x, gu, d)
        try:
            check_tensor(got, f"{call} 的返回值", shape=tuple(x.shape), dtype=x.dtype)
        except CheckFailed as e:
            raise CheckFailed(f"{e}\n  输入：{context}") from None
        want = ref_mlp(x, gate, up, down, keep=owner_mask(inter, rank, size))
        try:
            check_close(got.double(), want, f"{call} 的返回值", atol=atol, rtol=rtol)
        except CheckFailed as e:
            extra = ""
            n = gu.shape[0] // 2
            swapped = torch.cat([gu[n:], gu[:n]])
            no_silu = (
                (x.double() @ gu[:n].T.double()) * (x.double() @ gu[n:].T.double()) @ d.T.double()
            )
            alt = (
                silu64(x.double() @ swapped[:n].T.double()) * (x.double() @ swapped[n:].T.double())
            ) @ d.T.double()
            if torch.allclose(got.double(), alt, atol=atol, rtol=rtol):
                extra = (
                    "\n  看起来 silu 用在了后一半（up）上：silu 作用在前一半（gate），再乘后一半"
                )
            elif torch.allclose(got.double(), no_silu, atol=atol, rtol=rtol):
                extra = "\n  看起来忘了 silu"
            raise CheckFailed(f"{e}\n  输入：{context}{extra}") from None
        # 其他 rank 的部分和几乎是 0 时（随机抽到的 x 很特殊），只算自己这份也“等于”完整输出，不能据此判错
        others = (full - want).abs().max().item()
        if size > 1 and others > 1e-3 * (1 + full.abs().max().item()):
            check(
                not torch.allclose(got.double(), full, atol=1e-6, rtol=1e-6),
                f"{call}：size={size} 时单独一个 rank 的部分和不应该等于完整的 MLP 输出，"
                f"要加上其他 rank 的部分和才是",
            )


def check_tp_mlp(mod, x, gate, up, down, size) -> None:
    context = f"x{tuple(x.shape)}、gate/up{tuple(gate.shape)}、down{tuple(down.shape)}、{x.dtype}，size={size}"
    calls: list[tuple[torch.Tensor, torch.Tensor]] = []
    original = mod.rank_mlp
    marks: list[torch.Tensor] = []
    mark_gen = torch.Generator().manual_seed(size * 1000 + x.shape[0])

    def spy(x_, gate_up_local, down_local):
        # 数一数 tp_mlp 对哪些 rank 调用了 rank_mlp；再在每份部分和上加一个记号：
        # tp_mlp 真把部分和加起来了，结果里就正好多出所有记号之和
        calls.append((gate_up_local.detach().clone(), down_local.detach().clone()))
        mark = torch.randn(x.shape[0], down_local.shape[0], generator=mark_gen, dtype=torch.float64)
        marks.append(mark)
        return original(x_, gate_up_local, down_local) + mark.to(x.dtype)

    mod.rank_mlp = spy
    try:
        got = mod.tp_mlp(x, gate, up, down, size)
    finally:
        mod.rank_mlp = original
    call = f"tp_mlp(x, gate, up, down, size={size})"
    try:
        check_tensor(got, f"{call} 的返回值", shape=tuple(x.shape), dtype=x.dtype)
    except CheckFailed as e:
        raise CheckFailed(f"{e}\n  输入：{context}") from None
    atol, rtol = tolerance(x.dtype)
    check(
        len(calls) > 0,
        f"{call} 一次也没有调用 rank_mlp：这道题要的是“每个 rank 调用 rank_mlp、只用自己的权重算部分和，"
        "再把部分和加起来”，不是直接算完整的 MLP",
    )
    full = ref_mlp(x, gate, up, down)
    marked = full + sum(marks[1:], marks[0])
    if not torch.allclose(got.double(), marked, atol=atol, rtol=rtol):
        if torch.allclose(got.double(), full, atol=atol, rtol=rtol):
            check(
                False,
                f"{call} 的返回值不是各 rank 的 rank_mlp 返回值之和。\n"
                "  测试在每个 rank_mlp 的返回值上加了一个记号，你的结果里没有这些记号："
                "部分和被丢掉了，结果是别的办法算出来的。\n"
                "  tp_mlp 要把每个 rank 的部分和加起来（模拟 all-reduce）作为结果",
            )
        try:
            check_close(got.double(), marked, f"{call} 的返回值", atol=atol, rtol=rtol)
        except CheckFailed as e:
            raise CheckFailed(
                f"{e}\n  输入：{context}\n  它应该是各 rank 的 rank_mlp 返回值之和（加起来等于不切的 MLP）"
            ) from None
    # 不加记号再跑一次：加起来等于不切的 MLP
    got = mod.tp_mlp(x, gate, up, down, size)
    try:
        check_close(got.double(), full, f"{call} 的返回值", atol=atol, rtol=rtol)
    except CheckFailed as e:
        raise CheckFailed(f"{e}\n  输入：{context}\n  它应该等于不切的 MLP") from None

    check(
        len(calls) == size,
        f"{call} 应该对每个 rank 调用一次 rank_mlp（共 {size} 次），你的调用了 {len(calls)} 次。"
        "这道题要的是“每个 rank 只用自己的权重算部分和，再加起来”，不是直接算完整的 MLP",
    )
    for rank in range(size):
        gu, d = ref_gate_up(gate, up, rank, size), ref_row(down, rank, size)
        found = any(
            c_gu.shape == gu.shape
            and c_d.shape == d.shape
            and torch.equal(c_gu, gu)
            and torch.equal(c_d, d)
            for c_gu, c_d in calls
        )
        check(
            found,
            f"{call} 调用 rank_mlp 时，没有一次传的是 rank {rank} 的权重"
            f"（gate_up_shard(gate, up, {rank}, {size})、row_shard(down, {rank}, {size})）",
        )


def check_bad_arguments(mod, gen, rng: random.Random) -> None:
    """坏参数：形状、size、rank 都随机；rank 和 size 的每个界都查两次：就在边界上一次、远一些一次；
    要切的那一维比 size 的倍数多一个或者少一个；weight 是一维的或者三维的；gate 和 up 的行数或列数不同。"""

    def column(weight, rank, size):  # 按位置传参
        return mod.column_shard(weight, rank, size)

    def row(weight, rank, size):
        return mod.row_shard(weight, rank, size)

    def gate_up(gate, up, rank, size):
        return mod.gate_up_shard(gate, up, rank, size)

    def tp(x, gate, up, down, size):
        return mod.tp_mlp(x, gate, up, down, size)

    for _ in range(2):
        size = rng.choice([2, 3, 4, 8])
        shape = [size * rng.randint(1, 4), size * rng.randint(1, 4)]
        for name, fn, dim in (("column_shard", column, 0), ("row_shard", row, 1)):

            def uneven(r, dim=dim):  # 要切的那一维多一个或者少一个（另一维照样能整除）
                bad = list(shape)
                bad[dim] += r.choice([1, -1])
                return torch.zeros(bad)

            good = dict(weight=torch.zeros(shape), rank=rng.randrange(size), size=size)
            kinds = [
                ("weight", lambda r: torch.zeros(shape[0] * shape[1])),  # 一维
                ("weight", lambda r: torch.zeros(*shape, r.randint(1, 3))),  # 三维：前两维都对
                ("weight", uneven),
                ("rank", lambda r: -1), ("rank", lambda r: bad_int(r, -1)),  # 负数
                ("rank", lambda r: size), ("rank", lambda r: size + r.randint(1, 1000)),  # 越过 size
                ("size", lambda r: 0), ("size", lambda r: bad_int(r, 0)),  # 0 或负数
            ]
            for key, spoil in kinds:
                probe_bad_arguments(fn, good, {key: spoil}, rng, name=name, tries=1)

        inter, hidden = size * rng.randint(1, 4), rng.randint(1, 6)
        x, gate, up, down = random_mlp(gen, rng.randint(1, 3), hidden, inter, torch.float32)
        good = dict(gate=gate, up=up, rank=rng.randrange(size), size=size)
        kinds = [
            ("up", lambda r: torch.zeros(inter + size * r.randint(1, 3), hidden)),  # 行数不同（也能整除）
            ("up", lambda r: torch.zeros(inter, hidden + r.randint(1, 5))),  # 列数不同
            ("gate", lambda r: torch.zeros(inter, r.choice([hidden + 1, hidden + r.randint(2, 5)]))),
            ("rank", lambda r: r.choice([-1, bad_int(r, -1)])),
            ("rank", lambda r: r.choice([size, size + r.randint(1, 1000)])),
            ("size", lambda r: r.choice([0, bad_int(r, 0)])),
        ]
        for key, spoil in kinds:
            probe_bad_arguments(gate_up, good, {key: spoil}, rng, name="gate_up_shard", tries=1)
        # 中间维不能被 size 整除（比中间维还大的 size 也算）
        uneven_sizes = [s for s in range(2, inter + 5) if inter % s]
        good = dict(x=x, gate=gate, up=up, down=down, size=size)
        probe_bad_arguments(tp, good, {"size": uneven_sizes}, rng, name="tp_mlp", tries=2)


def run(mod: object) -> None:
    for name in ("column_shard", "row_shard", "gate_up_shard", "rank_mlp", "tp_mlp"):
        require(mod, name)
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)

    # ---- 切片：先一个能看清的小矩阵，再随机的
    small = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    check_shards(mod, small, 2)
    for _ in range(20):
        size = rng.choice([1, 2, 4, 8])
        weight = torch.randn(
            size * rng.randint(1, 5), size * rng.randint(1, 5), generator=gen, dtype=torch.float64
        )
        check_shards(mod, weight, size)
    for size in (1, 2, 4, 8):
        _, gate, up, _ = random_mlp(
            gen, 1, rng.randint(1, 9), size * rng.randint(1, 4), torch.float64
        )
        check_gate_up(mod, gate, up, size)

    # ---- 每个 rank 的部分和（用测试自己切好的权重）
    check_rank_mlp(mod, *random_mlp(gen, 3, 4, 8, torch.float64), 2)
    for size in (1, 2, 4, 8):
        tokens, hidden, inter = rng.randint(1, 6), rng.randint(1, 24), size * rng.randint(1, 6)
        check_rank_mlp(mod, *random_mlp(gen, tokens, hidden, inter, torch.float64), size)

    # ---- 加起来：size = 1, 2, 4, 8，float64 和 float32，还有 SmolLM2 的尺寸
    for size in (1, 2, 4, 8):
        for dtype in (torch.float64, torch.float32):
            tokens, hidden, inter = rng.randint(1, 6), rng.randint(1, 32), size * rng.randint(1, 8)
            check_tp_mlp(mod, *random_mlp(gen, tokens, hidden, inter, dtype), size)
    check_tp_mlp(mod, *random_mlp(gen, 3, 576, 1536, torch.float32), 2)

    check_bad_arguments(mod, gen, random.Random(SEED + 1))


if __name__ == "__main__":
    main(run)
