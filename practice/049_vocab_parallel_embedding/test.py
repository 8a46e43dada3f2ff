"""练习 049 的评测：词表按连续的块切给各 rank，每个 rank 查自己的那段、别的输出零行，加起来等于整表查。

检查顺序：vocab_block 的区间 → shard_embedding 的分片（含补零行）→ local_lookup（随机 id，含每块的第一个、
最后一个 id 和词表的最后一个 id；整批一次算、不把数取回 Python）→ vocab_parallel_embedding（对每个 rank
调用一次 local_lookup、传整批，返回的正是它们的和：测试在每份结果上做记号），最后和 F.embedding 比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

torch.set_num_threads(1)  # 张量都很小：单线程更快，也不和别的进程抢 CPU 核

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (
    CheckFailed,
    bad_int,
    check,
    check_close,
    check_equal,
    check_tensor,
    check_type,
    main,
    mistake_hint,
    probe_bad_arguments,
    require,
    seed,
    short,
    torch_calls,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
TO_PYTHON = {"tolist", "item", "numpy", "__float__", "__int__", "__index__", "__bool__", "__array__", "nonzero"}


# ---------------------------------------------------------------------------
# 参考实现：不切片，直接按 id 属于哪个 rank 来算
# ---------------------------------------------------------------------------


def per_rank(vocab: int, tp: int) -> int:
    return (vocab + tp - 1) // tp


def ref_block(vocab: int, tp: int, rank: int) -> tuple[int, int]:
    per = per_rank(vocab, tp)
    start = min(rank * per, vocab)
    return start, min(start + per, vocab)


def ref_shard(weight: torch.Tensor, tp: int, rank: int) -> torch.Tensor:
    vocab, dim = weight.shape
    per = per_rank(vocab, tp)
    rows = [weight[i] if i < vocab else torch.zeros(dim, dtype=weight.dtype) for i in range(rank * per, rank * per + per)]
    return torch.stack(rows) if rows else weight.new_zeros(0, dim)


def ref_lookup(ids: torch.Tensor, shard: torch.Tensor, start: int) -> torch.Tensor:
    """逐个 id 查：在块里就取那一行，不在就是零行（参考实现慢一点没关系）。"""
    flat = ids.reshape(-1).tolist()
    dim = shard.shape[1]
    rows = [shard[i - start] if start <= i < start + shard.shape[0] else torch.zeros(dim, dtype=shard.dtype)
            for i in flat]
    out = torch.stack(rows) if rows else shard.new_zeros(0, dim)
    return out.reshape(*ids.shape, dim)


def random_weight(gen: torch.Generator, vocab: int, dim: int, dtype: torch.dtype) -> torch.Tensor:
    # 没有零：查出零行只能是因为“不归我管”
    w = torch.rand(vocab, dim, generator=gen, dtype=torch.float64) + 0.5
    sign = torch.randint(0, 2, (vocab, dim), generator=gen) * 2 - 1
    return (w * sign).to(dtype)


def interesting_ids(rng: random.Random, vocab: int, tp: int, count: int) -> list[int]:
    """每块的第一个、最后一个 id，词表的第一个、最后一个 id（紧挨着补零的那几行），再加随机的。"""
    special = {0, vocab - 1, max(0, vocab - 2)}
    for r in range(tp):
        start, stop = ref_block(vocab, tp, r)
        if stop > start:
            special.update({start, stop - 1, min(stop, vocab - 1)})
    ids = list(special) + [rng.randrange(vocab) for _ in range(max(0, count - len(special)))]
    rng.shuffle(ids)
    return ids


def random_ids(rng: random.Random, vocab: int, tp: int) -> torch.Tensor:
    shape = rng.choice([[rng.randint(1, 12)], [rng.randint(1, 4), rng.randint(1, 6)]])
    total = 1
    for n in shape:
        total *= n
    ids = interesting_ids(rng, vocab, tp, total)
    # 特别的 id 比形状能装的多时随机挑；形状够大时全装进去
    ids = (ids * (total // len(ids) + 1))[:total] if len(ids) < total else rng.sample(ids, total)
    return torch.tensor(ids, dtype=rng.choice([torch.int64, torch.int64, torch.int32])).reshape(shape)


# ---------------------------------------------------------------------------
# vocab_block、shard_embedding
# ---------------------------------------------------------------------------


def check_blocks(mod, rng: random.Random) -> None:
    cases = [(10, 4), (8, 4), (151936, 8), (5, 4), (3, 8), (1, 1)]
    cases += [(rng.randint(1, 400), rng.randint(1, 9)) for _ in range(25)]
    for vocab, tp in cases:
        per = per_rank(vocab, tp)
        for rank in range(tp):
            call = f"vocab_block(vocab={vocab}, tp={tp}, rank={rank})"
            got = mod.vocab_block(vocab, tp, rank)
            check_type(got, tuple, f"{call} 的返回值")
            check(len(got) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in got),
                  f"{call} 应该返回两个 int (start, stop)，你给的是 {short(got)}")
            want = ref_block(vocab, tp, rank)
            if got != want:
                hits = []
                floor = vocab // tp
                if got == (rank * floor, vocab if rank == tp - 1 else (rank + 1) * floor):
                    hits.append(f"每个 rank 按 vocab // tp = {floor} 行切、余数给了最后一个 rank：题目要的是每个 rank "
                                f"ceil(vocab / tp) = {per} 行，最后一个 rank 不够时补零行，这样各 rank 的分片形状一样")
                elif got == (rank * per, (rank + 1) * per):
                    hits.append(f"stop 没有截到 vocab：最后一块只到 vocab = {vocab}，多出来的是补的零行，不是真的 id")
                check_equal(got, want, call, f"vocab = {vocab}，tp = {tp}，每个 rank ceil(vocab / tp) = {per} 行"
                            + mistake_hint(hits))
    good = dict(vocab=rng.randint(1, 100), tp=rng.randint(1, 8))
    good["rank"] = rng.randrange(good["tp"])
    bad = {"vocab": lambda r: r.choice([0, bad_int(r, 0)]),
           "tp": lambda r: r.choice([0, bad_int(r, 0)]),
           "rank": lambda r: r.choice([-1, bad_int(r, -1), good["tp"], good["tp"] + r.randint(1, 50)])}
    probe_bad_arguments(mod.vocab_block, good, bad, rng, name="vocab_block", tries=6)


def check_shards(mod, rng: random.Random, gen: torch.Generator) -> None:
    for trial in range(14):
        tp = rng.randint(1, 8)
        vocab = rng.choice([tp * rng.randint(1, 6), tp * rng.randint(1, 6) + rng.randint(1, tp), rng.randint(1, tp)])
        dim = rng.randint(1, 9)
        dtype = DTYPES[trial % len(DTYPES)]
        weight = random_weight(gen, vocab, dim, dtype)
        original = weight.clone()
        per = per_rank(vocab, tp)
        for rank in range(tp):
            call = f"shard_embedding(weight{tuple(weight.shape)}, tp={tp}, rank={rank})"
            got = mod.shard_embedding(weight, tp, rank)
            try:
                check_tensor(got, f"{call} 的返回值", shape=(per, dim), dtype=dtype)
            except CheckFailed as e:
                start, stop = ref_block(vocab, tp, rank)
                extra = ""
                if isinstance(got, torch.Tensor) and got.dim() == 2 and got.shape[0] == stop - start != per:
                    extra = (f"\n  看起来：rank {rank} 的块只有 {stop - start} 行真的 id，没有补零行。"
                             f"每个 rank 的分片都是 ceil(vocab / tp) = {per} 行：形状一样，各 rank 才能用同一份代码、"
                             "同样大小的缓冲区")
                raise CheckFailed(f"{e}{extra}") from None
            want = ref_shard(weight, tp, rank)
            if not torch.equal(got, want):
                bad = int((got != want).any(dim=1).nonzero()[0])
                start, stop = ref_block(vocab, tp, rank)
                row = f"weight 的第 {start + bad} 行" if start + bad < stop else "补的零行"
                check(False, f"{call} 的第 {bad} 行不对：它应该是{row}（rank {rank} 负责 [{start}, {stop})，"
                             f"每个 rank {per} 行，不够的在末尾补零）")
        check(torch.equal(weight, original), "shard_embedding 改动了传进来的 weight")
    good = dict(weight=torch.zeros(6, 3), tp=3, rank=rng.randrange(3))
    bad = {"weight": lambda r: r.choice([torch.zeros(6), torch.zeros(6, 3, r.randint(1, 3))]),
           "rank": lambda r: r.choice([-1, 3, 3 + r.randint(1, 20)]),
           "tp": lambda r: r.choice([0, bad_int(r, 0)])}
    probe_bad_arguments(mod.shard_embedding, good, bad, rng, name="shard_embedding", tries=6)


# ---------------------------------------------------------------------------
# local_lookup
# ---------------------------------------------------------------------------


def call_lookup(fn, ids, shard, start, what: str):
    try:
        return fn(ids, shard, start)
    except (IndexError, RuntimeError) as e:
        text = str(e)
        if "index" in text.lower() and "range" in text.lower():
            raise CheckFailed(
                f"{what} 查表时下标越界了（{getattr(e, 'remote_type', type(e).__name__)}: {text.splitlines()[0]}）。\n"
                "  不归这个 rank 管的 id 减去 start 以后不在 [0, shard.shape[0]) 里：要先换成一个合法的下标（比如 0）"
                "再查表，查完把这些行置零。GPU 上越界的下标不会抛异常，而是让整个进程挂掉") from None
        raise


def check_lookup_once(mod, ids, shard, start, context: str) -> None:
    dim = shard.shape[1]
    what = f"local_lookup(ids{tuple(ids.shape)}, shard{tuple(shard.shape)}, start={start})"
    ids_before, shard_before = ids.clone(), shard.clone()
    got = call_lookup(mod.local_lookup, ids, shard, start, what)
    check_tensor(got, f"{what} 的返回值", shape=(*ids.shape, dim), dtype=shard.dtype)
    check(torch.equal(ids, ids_before) and torch.equal(shard, shard_before), f"{what} 改动了传进来的 ids 或 shard")
    want = ref_lookup(ids, shard, start)
    if torch.equal(got, want):
        return
    flat_ids = ids.reshape(-1)
    bad = (got != want).reshape(flat_ids.shape[0], dim).any(dim=1)
    i = int(bad.nonzero()[0])
    tid = int(flat_ids[i])
    per = shard.shape[0]
    inside = start <= tid < start + per
    hits = []
    local = (flat_ids.long() - start).reshape(ids.shape)
    clamped = F.embedding(local.clamp(0, per - 1), shard)
    wrapped = F.embedding(local % per, shard)
    if torch.equal(got, clamped):
        hits.append("块外的 id 被夹到了块的两头（clamp）：它们会查出第 0 行或最后一行，不是零行。要先记下“哪些 id 归我”，"
                    "查完把其余的行置零")
    if torch.equal(got, wrapped):
        hits.append("块外的 id 取了模（% per）：它们查出了别的行，不是零行")
    where = f"id {tid} 在这个 rank 的块 [{start}, {start + per}) 里，应该是 shard[{tid - start}]" if inside \
        else f"id {tid} 不在这个 rank 的块 [{start}, {start + per}) 里，应该是全零行"
    check(False, f"{what} 的结果不对：展平后的第 {i} 个 token，{where}。\n"
                 f"  你的那一行：{short(got.reshape(-1, dim)[i].tolist())}\n  输入：{context}" + mistake_hint(hits))


def check_lookups(mod, rng: random.Random, gen: torch.Generator) -> None:
    for trial in range(16):
        tp = rng.randint(1, 8)
        vocab = rng.choice([tp * rng.randint(1, 8), tp * rng.randint(1, 8) + rng.randint(1, tp), rng.randint(1, 2 * tp)])
        dim = rng.randint(1, 8)
        dtype = DTYPES[trial % len(DTYPES)]
        weight = random_weight(gen, vocab, dim, dtype)
        ids = random_ids(rng, vocab, tp)
        for rank in range(tp):
            start = rank * per_rank(vocab, tp)
            shard = ref_shard(weight, tp, rank)
            context = (f"vocab = {vocab}，tp = {tp}，rank = {rank}，{str(dtype).removeprefix('torch.')}，"
                       f"ids = {short(ids.tolist(), 160)}")
            check_lookup_once(mod, ids, shard, start, context)


def check_one_batch(mod, gen: torch.Generator) -> None:
    """整批一次算：torch 运算的次数不随 token 数增长，也不把 id 取回 Python 逐个查。"""
    weight = random_weight(gen, 64, 8, torch.float32)
    shard = ref_shard(weight, 4, 1)
    counts = {}
    for n in (3, 300):
        ids = torch.randint(0, 64, (n,), generator=gen)
        _, names = torch_calls(mod.local_lookup, ids, shard, 16)
        counts[n] = names
    few, many = counts[3], counts[300]
    pulled = sorted(TO_PYTHON.intersection(few + many))
    check(not pulled,
          f"local_lookup 用了 {', '.join(pulled)}：把张量里的数取回了 Python。引擎里这一层在 GPU 上、在 CUDA 图里跑"
          "（第 18 章），取一次数就要等 GPU 算完（同步），图也录不下来：要整批用张量运算算完"
          "（比较、torch.where、F.embedding、masked_fill）")
    check(len(many) <= len(few) + 2,
          f"local_lookup 做的 torch 运算次数随 token 数增长：3 个 token 时 {len(few)} 次，300 个时 {len(many)} 次。"
          "这是在逐个 token 循环；要对整批 ids 一次算：先算出“哪些 id 归我”的掩码，一次查表，一次置零")


# ---------------------------------------------------------------------------
# vocab_parallel_embedding：每个 rank 调用一次 local_lookup，结果相加
# ---------------------------------------------------------------------------


def check_combine(mod, rng: random.Random, gen: torch.Generator, tp: int, vocab: int, dim: int,
                  dtype: torch.dtype) -> None:
    weight = random_weight(gen, vocab, dim, dtype)
    shards = [ref_shard(weight, tp, r) for r in range(tp)]
    per = per_rank(vocab, tp)
    ids = random_ids(rng, vocab, tp)
    context = f"vocab = {vocab}，tp = {tp}，dim = {dim}，{str(dtype).removeprefix('torch.')}，ids = {short(ids.tolist(), 160)}"
    call = f"vocab_parallel_embedding(ids{tuple(ids.shape)}, shards（{tp} 个 {tuple(shards[0].shape)}）)"
    calls: list[tuple[torch.Tensor, torch.Tensor, object]] = []
    returned: list[torch.Tensor] = []
    original = mod.local_lookup
    mark_gen = torch.Generator().manual_seed(rng.randrange(2**31))

    def spy(ids, shard, start):  # 参数名和 local_lookup 的一样：按关键字传也行
        # 记下每次调用；返回参考的查表结果加一个记号（每个数加 ±1 或 ±2）：
        # 把各 rank 的结果加起来，结果里就正好多出所有记号之和
        check_type(ids, torch.Tensor, f"{call} 传给 local_lookup 的 ids")
        check_type(shard, torch.Tensor, f"{call} 传给 local_lookup 的 shard")
        calls.append((ids.detach().clone(), shard.detach().clone(), start))
        shape = (*ids.shape, shard.shape[1])
        mark = torch.randint(1, 3, shape, generator=mark_gen) * (torch.randint(0, 2, shape, generator=mark_gen) * 2 - 1)
        out = ref_lookup(ids, shard, start if isinstance(start, int) else 0) + mark.to(shard.dtype)
        returned.append(out.clone())
        return out

    mod.local_lookup = spy
    try:
        got = mod.vocab_parallel_embedding(ids, shards)
    finally:
        mod.local_lookup = original
    check_tensor(got, f"{call} 的返回值", shape=(*ids.shape, dim), dtype=dtype)
    check(calls, f"{call} 一次也没有调用 local_lookup：题目要的是每个 rank 只用自己的分片查一次，再把结果加起来"
                 "（all-reduce），不是拼回整张表来查")
    check(len(calls) == tp,
          f"{call} 应该对每个 rank 调用一次 local_lookup（共 {tp} 次），你的调用了 {len(calls)} 次。\n"
          "  每次调用要传整批 ids：逐个 token（或者一小段一小段）地调用，就是在 Python 里按 token 循环")
    for i, (c_ids, c_shard, c_start) in enumerate(calls):
        check(tuple(c_ids.shape) == tuple(ids.shape) and torch.equal(c_ids.long(), ids.long()),
              f"{call} 第 {i} 次调用 local_lookup 传的 ids 形状是 {tuple(c_ids.shape)}，不是整批 ids {tuple(ids.shape)}："
              "每个 rank 一次查整批")
    for rank in range(tp):
        found = any(c_start == rank * per and tuple(c_shard.shape) == tuple(shards[rank].shape)
                    and torch.equal(c_shard, shards[rank]) for _, c_shard, c_start in calls)
        check(found, f"{call} 调用 local_lookup 时，没有一次传的是 rank {rank} 的分片和 start = {rank} × {per} = {rank * per}")
    marked = sum(r.double() for r in returned)
    full = F.embedding(ids, weight)
    tol = 1e-5 if dtype in (torch.float32, torch.float64) else 0.25  # 半精度：几次相加各有舍入
    if not torch.allclose(got.double(), marked, atol=tol, rtol=tol / 10):
        if torch.equal(got, full):
            check(False, f"{call} 的返回值不是各 rank 的 local_lookup 返回值之和：测试在每份返回值上加了一个记号，"
                         "你的结果里没有这些记号——各 rank 的结果被扔掉了，结果是别的办法（比如拼回整张表）算出来的。\n"
                         f"  输入：{context}")
        check_close(got.double(), marked, f"{call} 的返回值（各 rank 的 local_lookup 返回值之和）",
                    atol=tol, rtol=tol / 10)
    # 不做记号再来一次：加起来必须逐位等于整表查（每个 token 只有一个 rank 给出非零的行，其余加的都是 0）
    got = mod.vocab_parallel_embedding(ids, shards)
    check_tensor(got, f"{call} 的返回值", shape=(*ids.shape, dim), dtype=dtype)
    if not torch.equal(got, full):
        flat = (got != full).reshape(-1, dim).any(dim=1)
        i = int(flat.nonzero()[0])
        check(False, f"{call} 不等于整张表上的 F.embedding(ids, weight)：展平后的第 {i} 个 token（id "
                     f"{int(ids.reshape(-1)[i])}）不对。\n  输入：{context}")


def check_combine_bad_arguments(mod, rng: random.Random) -> None:
    ids = torch.tensor([0, 1, 2])
    good = dict(ids=ids, shards=[torch.zeros(2, 3), torch.zeros(2, 3)])
    bad = {"shards": lambda r: r.choice([[], [torch.zeros(2, 3), torch.zeros(3, 3)], [torch.zeros(2, 3), torch.zeros(2, 4)]])}
    probe_bad_arguments(mod.vocab_parallel_embedding, good, bad, rng, name="vocab_parallel_embedding", tries=3)


def run(mod: object) -> None:
    for name in ("vocab_block", "shard_embedding", "local_lookup", "vocab_parallel_embedding"):
        require(mod, name)
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)
    check_blocks(mod, rng)
    check_shards(mod, rng, gen)
    check_lookups(mod, rng, gen)
    check_one_batch(mod, gen)
    for tp in range(1, 9):
        vocab = rng.choice([tp * rng.randint(1, 9), tp * rng.randint(1, 9) + rng.randint(1, tp)])
        check_combine(mod, rng, gen, tp, vocab, rng.randint(1, 8), DTYPES[tp % len(DTYPES)])
    check_combine(mod, rng, gen, 8, 5, 4, torch.float32)  # tp 比词表还大：后面几个 rank 的块是空的
    check_combine_bad_arguments(mod, rng)


if __name__ == "__main__":
    main(run)
