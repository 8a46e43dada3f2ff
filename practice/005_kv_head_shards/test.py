"""练习 005 的评测：div_even、每个 rank 的 KV 头、按头切权重，都和独立的参考实现比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (
    seed,
    bad_int,
    probe_bad_arguments,
    check,
    check_equal,
    check_int_list,
    check_raises,
    check_tensor,
    check_type,
    main,
    require,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


# ---------------------------------------------------------------------------
# 参考实现：把“头”和“rank”都看成 [0, 1) 上的等长小段——
# 第 h 个头占 [h/H, (h+1)/H)，第 r 个 rank 占 [r/T, (r+1)/T)，两段有重叠，rank r 就持有头 h。
# 切分和复制是同一条规则，不用分情况。
# ---------------------------------------------------------------------------


def ref_can_split(num_heads: int, tp_size: int) -> bool:
    return num_heads % tp_size == 0 or tp_size % num_heads == 0


def ref_heads_of_rank(num_heads: int, tp_size: int, rank: int) -> list[int]:
    # 两段 [h/H, (h+1)/H) 与 [r/T, (r+1)/T) 有正长度的重叠 ⇔ h*T < (r+1)*H 且 r*H < (h+1)*T
    return [
        h
        for h in range(num_heads)
        if h * tp_size < (rank + 1) * num_heads and rank * num_heads < (h + 1) * tp_size
    ]


def ref_div_even(a: int, b: int, allow_replicate: bool) -> int | None:
    """None 表示应该抛 ValueError。"""
    if a < 0 or b <= 0:
        return None
    if a % b == 0:  # 包括 a == 0
        return a // b
    if allow_replicate and 0 < a < b and b % a == 0:
        return 1
    return None


def ref_shard(
    weight: torch.Tensor, num_heads: int, head_dim: int, tp_size: int, rank: int
) -> torch.Tensor:
    per_head = weight.reshape(num_heads, head_dim, weight.shape[1])
    index = torch.tensor(ref_heads_of_rank(num_heads, tp_size, rank))
    return per_head.index_select(0, index).reshape(-1, weight.shape[1])


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def check_div_even(div_even: object, rng: random.Random) -> None:
    cases = [
        (8, 2, False),
        (8, 16, True),
        (3, 3, False),
        (3, 2, True),
        (8, 16, False),
        (3, 6, True),
        (3, 4, True),
        (8, 3, True),
        (1, 5, True),
        (16, 16, True),
        (0, 4, False),
        (0, 4, True),
    ]
    cases += [(rng.randint(1, 64), rng.randint(1, 64), rng.random() < 0.5) for _ in range(400)]
    for a, b, rep in cases:
        call = f"div_even({a}, {b}, allow_replicate={rep})"
        want = ref_div_even(a, b, rep)
        if want is None:
            check_raises(ValueError, div_even, a, b, allow_replicate=rep, what=call)
        else:
            got = div_even(a, b, allow_replicate=rep)
            check_type(got, int, f"{call} 的返回值")
            check_equal(got, want, call)


def check_heads_of_rank(kv_heads_of_rank: object, rng: random.Random) -> None:
    configs = [(8, 1), (8, 2), (8, 4), (8, 8), (8, 16), (3, 1), (3, 3), (3, 6), (1, 4)]
    configs += [
        (rng.choice([1, 2, 3, 4, 6, 8, 12, 16, 32]), rng.choice([1, 2, 3, 4, 6, 8, 16, 32]))
        for _ in range(60)
    ]
    for heads, tp in configs:
        if not ref_can_split(heads, tp):
            rank = rng.randrange(tp)
            check_raises(
                ValueError,
                kv_heads_of_rank,
                heads,
                tp,
                rank,
                what=f"kv_heads_of_rank({heads}, {tp}, {rank})（{heads} 个头分不给 {tp} 个 rank）",
            )
            continue
        for rank in range(tp):
            call = f"kv_heads_of_rank(num_kv_heads={heads}, tp_size={tp}, tp_rank={rank})"
            got = kv_heads_of_rank(heads, tp, rank)
            check_int_list(got, f"{call} 的返回值")
            check_equal(got, ref_heads_of_rank(heads, tp, rank), call)


def check_shard_weight(shard_kv_weight: object, rng: random.Random) -> None:
    gen = torch.Generator().manual_seed(SEED)
    configs = [(8, 2), (8, 16), (3, 3), (3, 1)]
    configs += [(rng.choice([1, 2, 4, 6, 8]), rng.choice([1, 2, 4, 8, 16])) for _ in range(30)]
    for heads, tp in configs:
        if not ref_can_split(heads, tp):
            continue
        head_dim = rng.choice([2, 4, 8, 16, 64])
        hidden = rng.randint(1, 48)
        dtype = rng.choice([torch.float32, torch.float16, torch.bfloat16])
        weight = torch.randn(heads * head_dim, hidden, generator=gen).to(dtype)
        original = weight.clone()
        local_heads = len(ref_heads_of_rank(heads, tp, 0))
        for rank in range(tp):
            call = (
                f"shard_kv_weight(weight{tuple(weight.shape)}, num_kv_heads={heads}, "
                f"head_dim={head_dim}, tp_size={tp}, tp_rank={rank})"
            )
            got = shard_kv_weight(weight, heads, head_dim, tp, rank)
            check_tensor(
                got, f"{call} 的返回值", shape=(local_heads * head_dim, hidden), dtype=dtype
            )
            check(got.is_contiguous(), f"{call} 的返回值应该是连续（contiguous）的张量")
            want = ref_shard(weight, heads, head_dim, tp, rank)
            if not torch.equal(got, want):
                bad_row = int((got != want).any(dim=1).nonzero()[0])
                check(
                    False,
                    f"{call} 取错了行：第 {bad_row} 行应该来自全局第 "
                    f"{ref_heads_of_rank(heads, tp, rank)[bad_row // head_dim]} 个 KV 头",
                )
            check(torch.equal(weight, original), f"{call} 改动了传进来的 weight，它应该只读")


def check_bad_arguments(mod, rng: random.Random) -> None:
    """坏参数：头数、rank 数、rank 编号、weight 的行数都随机；每个界都查两次：就在边界上一次、
    远一些一次（只拦一个写死的坏值的代码过不去）。"""

    def div_even(a, b, allow_replicate):  # 按位置传参
        return mod.div_even(a, b, allow_replicate=allow_replicate)

    def heads_of_rank(num_kv_heads, tp_size, tp_rank):
        return mod.kv_heads_of_rank(num_kv_heads, tp_size, tp_rank)

    def shard(weight, num_kv_heads, head_dim, tp_size, tp_rank):
        return mod.shard_kv_weight(weight, num_kv_heads, head_dim, tp_size, tp_rank)

    for _ in range(3):
        good = dict(a=rng.randint(0, 64), b=rng.randint(1, 64), allow_replicate=rng.random() < 0.5)
        kinds = [
            ("a", lambda r: -1), ("a", lambda r: bad_int(r, -1)),  # 负数
            ("b", lambda r: 0), ("b", lambda r: bad_int(r, 0)),  # 0 或负数
        ]
        for key, spoil in kinds:
            probe_bad_arguments(div_even, good, {key: spoil}, rng, name="div_even", tries=1)

        heads = rng.choice([1, 2, 3, 4, 6, 8, 12, 16])
        tp = rng.choice([t for t in (1, 2, 3, 4, 6, 8, 16, 32) if ref_can_split(heads, t)])
        good = dict(num_kv_heads=heads, tp_size=tp, tp_rank=rng.randrange(tp))
        kinds = [
            ("num_kv_heads", lambda r: 0), ("num_kv_heads", lambda r: bad_int(r, 0)),  # 0 或负数
            ("tp_size", lambda r: 0), ("tp_size", lambda r: bad_int(r, 0)),
            ("tp_rank", lambda r: -1), ("tp_rank", lambda r: bad_int(r, -1)),  # 负数
            ("tp_rank", lambda r: tp), ("tp_rank", lambda r: tp + r.randint(1, 1000)),  # 越过 tp_size
        ]
        for key, spoil in kinds:
            probe_bad_arguments(heads_of_rank, good, {key: spoil}, rng, name="kv_heads_of_rank", tries=1)

        head_dim = rng.choice([2, 4, 8, 16])
        hidden = rng.randint(1, 8)
        rows = heads * head_dim

        def weight_with(n):
            return torch.zeros(n, hidden)

        good = dict(weight=weight_with(rows), num_kv_heads=heads, head_dim=head_dim, tp_size=tp,
                    tp_rank=rng.randrange(tp))
        # 行数多一行 / 少一行（就在边界上）、多几个整头 / 少几个整头（能切成整头，可头数不对）、多很多
        kinds = [
            lambda r: weight_with(rows + 1), lambda r: weight_with(rows - 1),
            lambda r: weight_with(rows + head_dim * r.randint(1, 4)),
            lambda r: weight_with(rows - head_dim * r.randint(1, heads)),
            lambda r: weight_with(rows + r.randint(2, 1000)),
        ]
        for spoil in kinds:
            probe_bad_arguments(shard, good, {"weight": spoil}, rng, name="shard_kv_weight", tries=1)


def run(mod: object) -> None:
    div_even = require(mod, "div_even")
    kv_heads_of_rank = require(mod, "kv_heads_of_rank")
    shard_kv_weight = require(mod, "shard_kv_weight")

    rng = random.Random(SEED)
    check_div_even(div_even, rng)
    check_heads_of_rank(kv_heads_of_rank, rng)
    check_shard_weight(shard_kv_weight, rng)
    check_bad_arguments(mod, random.Random(SEED + 1))


if __name__ == "__main__":
    main(run)
