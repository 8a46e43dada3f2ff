"""练习 013 的评测：模拟几个请求交替 prefill、decode，每次写入都查整块缓冲区，最后逐个请求取回比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch

sys.path.insert(
    0, str(Path(__file__).resolve().parent.parent)
)  # 找到 practice/judgekit.py
from judgekit import check, check_tensor, main, probe_bad_arguments, require, torch_calls, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


# ---------------------------------------------------------------------------
# 参考实现：一行一行地拷（Python 循环），不用高级索引
# ---------------------------------------------------------------------------


def ref_store(buf: torch.Tensor, new: torch.Tensor, out_loc: list[int]) -> torch.Tensor:
    result = buf.clone()
    for i, slot in enumerate(out_loc):
        result[slot].copy_(new[i])
    return result


def ref_gather(buf: torch.Tensor, row: list[int], length: int) -> torch.Tensor:
    if length == 0:
        return buf.new_empty((0, *buf.shape[1:]))
    return torch.stack([buf[row[pos]] for pos in range(length)])


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def first_bad_row(got: torch.Tensor, want: torch.Tensor) -> int:
    return int((got != want).reshape(got.shape[0], -1).any(dim=1).nonzero()[0])


def check_store(
    store_kv, k_buf, v_buf, k, v, out_loc: list[int], index_dtype, context: str
) -> None:
    want_k = ref_store(k_buf, k, out_loc)
    want_v = ref_store(v_buf, v, out_loc)
    k_before, v_before = k_buf.clone(), v_buf.clone()
    k_in, v_in = k.clone(), v.clone()
    loc = torch.tensor(out_loc, dtype=index_dtype)
    call = (
        f"store_kv(k_buf, v_buf, k, v, out_loc)，out_loc = {out_loc}（{index_dtype}）"
    )

    store_kv(k_buf, v_buf, k, v, loc)
    check(
        torch.equal(k, k_in) and torch.equal(v, v_in),
        f"{call} 改动了传进来的 k 或 v，它们应该只读\n  {context}",
    )
    check(
        torch.equal(loc, torch.tensor(out_loc, dtype=index_dtype)),
        f"{call} 改动了 out_loc\n  {context}",
    )
    for name, buf, want, before in (
        ("k_buf", k_buf, want_k, k_before),
        ("v_buf", v_buf, want_v, v_before),
    ):
        check_tensor(buf, name, shape=tuple(want.shape), dtype=want.dtype)
        if torch.equal(buf, want):
            continue
        if torch.equal(buf, before):
            check(
                False,
                f"{call} 之后 {name} 一点没变：要原地写进传进来的缓冲区"
                f"（k_buf[out_loc] = k），而不是生成一个新张量\n  {context}",
            )
        slot = first_bad_row(buf, want)
        if slot in out_loc:
            i = out_loc.index(slot)
            msg = f"第 {slot} 行应该是第 {i} 个新 token 的 {name[0].upper()}（out_loc[{i}] = {slot}），你写进去的不是"
        else:
            msg = f"第 {slot} 行不在 out_loc 里，应该原样不动，你的代码改了它"
        check(False, f"{call} 之后 {name} 不对：{msg}\n  {context}")


def check_gather(
    gather_kv, k_buf, v_buf, row: list[int], length: int, index_dtype, context: str
) -> None:
    k_before, v_before = k_buf.clone(), v_buf.clone()
    row_t = torch.tensor(row, dtype=index_dtype)
    call = f"gather_kv(k_buf, v_buf, page_table_row, {length})，page_table_row 的前 {length} 个 = {row[:length]}"
    got = gather_kv(k_buf, v_buf, row_t, length)
    check(
        isinstance(got, tuple) and len(got) == 2,
        f"{call} 应该返回 (k, v) 两个张量组成的 tuple，你返回的是 {type(got).__name__}",
    )
    shape = (length, *k_buf.shape[1:])
    for name, value, buf in (("k", got[0], k_buf), ("v", got[1], v_buf)):
        check_tensor(value, f"{call} 返回的 {name}", shape=shape, dtype=buf.dtype)
        want = ref_gather(buf, row, length)
        if not torch.equal(value, want):
            pos = first_bad_row(value, want)
            check(
                False,
                f"{call} 返回的 {name} 不对：第 {pos} 行应该来自槽位 page_table_row[{pos}] = {row[pos]}\n  {context}",
            )
    check(
        torch.equal(k_buf, k_before) and torch.equal(v_buf, v_before),
        f"{call} 改动了缓冲区，它应该只读",
    )
    check(
        torch.equal(row_t, torch.tensor(row, dtype=index_dtype)),
        f"{call} 改动了 page_table_row",
    )


def random_tensor(gen: torch.Generator, shape, dtype) -> torch.Tensor:
    return torch.randn(*shape, generator=gen).to(dtype)


def simulate(mod, rng: random.Random, gen: torch.Generator) -> None:
    page_size = rng.choice([1, 2, 4, 8])
    num_pages = rng.randint(8, 24)
    heads = rng.choice([1, 2, 3, 4, 8])
    head_dim = rng.choice([2, 4, 8, 16, 64])
    dtype = rng.choice([torch.float32, torch.float32, torch.float16, torch.bfloat16])
    num_slots = num_pages * page_size
    # 缓冲区一开始是随机的“旧数据”：读错了槽位一定看得出来
    k_buf = random_tensor(gen, (num_slots, heads, head_dim), dtype)
    v_buf = random_tensor(gen, (num_slots, heads, head_dim), dtype)
    context = (
        f"池子：{num_pages} 页 × page_size {page_size} = {num_slots} 个槽位，"
        f"{heads} 个 KV 头，head_dim {head_dim}，{dtype}"
    )

    free = list(range(num_pages))
    rng.shuffle(free)
    num_reqs = rng.randint(1, 4)
    rows: list[list[int]] = [
        [] for _ in range(num_reqs)
    ]  # 每个请求的页表行（已分配的位置）
    written_k: list[list[torch.Tensor]] = [[] for _ in range(num_reqs)]
    written_v: list[list[torch.Tensor]] = [[] for _ in range(num_reqs)]

    for _ in range(rng.randint(4, 12)):
        r = rng.randrange(num_reqs)
        n = (
            rng.randint(1, 3 * page_size + 1)
            if not rows[r]
            else rng.choice([1, 1, rng.randint(1, 5)])
        )
        need = sum(
            1 for pos in range(len(rows[r]), len(rows[r]) + n) if pos % page_size == 0
        )
        if need > len(free):
            continue
        out_loc = []
        for pos in range(len(rows[r]), len(rows[r]) + n):
            if pos % page_size == 0:
                out_loc.append(free.pop(0) * page_size)
            else:
                out_loc.append(rows[r][-1] + 1 if not out_loc else out_loc[-1] + 1)
        rows[r].extend(out_loc)
        k = random_tensor(gen, (n, heads, head_dim), dtype)
        v = random_tensor(gen, (n, heads, head_dim), dtype)
        index_dtype = rng.choice([torch.int32, torch.int64])
        check_store(mod.store_kv, k_buf, v_buf, k, v, out_loc, index_dtype, context)
        written_k[r].extend(k)
        written_v[r].extend(v)

    for r in range(num_reqs):
        length = len(rows[r])
        # 页表的一行比请求长：后面是没有意义的数字（这里是别的随机槽位）
        row = rows[r] + [rng.randrange(num_slots) for _ in range(rng.randint(0, 6))]
        index_dtype = rng.choice([torch.int32, torch.int64])
        for cut in {length, rng.randint(0, length)}:
            check_gather(mod.gather_kv, k_buf, v_buf, row, cut, index_dtype, context)
        if length:
            k, v = mod.gather_kv(
                k_buf, v_buf, torch.tensor(row, dtype=index_dtype), length
            )
            check(
                torch.equal(k, torch.stack(written_k[r]))
                and torch.equal(v, torch.stack(written_v[r])),
                f"第 {r} 个请求写进去、再按页表取回的 K/V 和当初写进去的不一样\n  {context}",
            )


def check_example(mod) -> None:
    """题目里的例子：page_size=2，页表这一行是 [6, 7, 0, 1]。"""
    gen = torch.Generator().manual_seed(SEED)
    k_buf = torch.randn(8, 1, 2, generator=gen)
    v_buf = torch.randn(8, 1, 2, generator=gen)
    k = torch.arange(8.0).reshape(4, 1, 2)
    v = -k
    context = (
        "题目里的例子：8 个槽位、1 个 KV 头、head_dim 2；先写槽位 [6, 7, 0]，再写 [1]"
    )
    check_store(
        mod.store_kv, k_buf, v_buf, k[:3], v[:3], [6, 7, 0], torch.int32, context
    )
    check_store(mod.store_kv, k_buf, v_buf, k[3:], v[3:], [1], torch.int32, context)
    check_gather(
        mod.gather_kv, k_buf, v_buf, [6, 7, 0, 1, 5, 5], 4, torch.int32, context
    )
    got_k, got_v = mod.gather_kv(
        k_buf, v_buf, torch.tensor([6, 7, 0, 1], dtype=torch.int32), 4
    )
    check(
        torch.equal(got_k, k) and torch.equal(got_v, v),
        f"{context}：按 [6, 7, 0, 1] 取回的 K/V 和写进去的不一样",
    )


def check_bad_arguments(mod, rng: random.Random, gen: torch.Generator) -> None:
    """坏参数：池子大小、头数、head_dim、槽位个数都随机；k 或 v 的形状错在随机的一维上，差得随机；
    元素个数对、形状不对的也算错；length 就在边界外一点，或者远一些。"""

    def store(k_buf, v_buf, k, v, out_loc):  # 按位置传参
        return mod.store_kv(k_buf, v_buf, k, v, out_loc)

    def gather(k_buf, v_buf, page_table_row, length):
        return mod.gather_kv(k_buf, v_buf, page_table_row, length)

    def off(r, x):  # 一个不等于 x 的正整数：差一点，或者差很多
        return r.choice([y for y in (x - 1, x + 1, x + r.randint(2, 30), max(1, x // 2)) if y > 0 and y != x])

    for _ in range(2):
        heads = rng.choice([1, 2, 3, 4, 8])
        head_dim = rng.choice([d for d in (2, 4, 8, 16) if d != heads])
        num_slots = rng.randint(8, 64)
        n = rng.randint(1, 8)
        k_buf = random_tensor(gen, (num_slots, heads, head_dim), torch.float32)
        v_buf = random_tensor(gen, (num_slots, heads, head_dim), torch.float32)
        loc = torch.tensor(rng.sample(range(num_slots), n), dtype=rng.choice([torch.int32, torch.int64]))
        k = random_tensor(gen, (n, heads, head_dim), torch.float32)
        v = random_tensor(gen, (n, heads, head_dim), torch.float32)
        good = dict(k_buf=k_buf, v_buf=v_buf, k=k, v=v, out_loc=loc)

        def wrong_dim(i):  # 第 i 维（0 token 数、1 头数、2 head_dim）不对，差得随机
            def spoil(r):
                shape = [n, heads, head_dim]
                shape[i] = off(r, shape[i])
                return torch.ones(shape)
            return spoil

        for key in ("k", "v"):
            t = good[key]
            spoils = [wrong_dim(0), wrong_dim(1), wrong_dim(2),
                      # 元素个数一样、形状不对：[n, D, H] 或者 [n, H*D]
                      lambda r, t=t: r.choice([t.reshape(n, head_dim, heads), t.reshape(n, heads * head_dim)])]
            for spoil in spoils:
                probe_bad_arguments(store, good, {key: spoil}, rng, name="store_kv", tries=1)

        m = rng.randint(0, 12)
        row = torch.tensor([rng.randrange(num_slots) for _ in range(m)], dtype=rng.choice([torch.int32, torch.int64]))
        good = dict(k_buf=k_buf, v_buf=v_buf, page_table_row=row, length=rng.randint(0, m))
        for spoil in (lambda r: m + 1, lambda r: m + r.randint(2, 1000), lambda r: -1, lambda r: -r.randint(2, 1000)):
            probe_bad_arguments(gather, good, {"length": spoil}, rng, name="gather_kv", tries=1)


def torch_ops(fn, *args) -> list[str]:
    return torch_calls(fn, *args)[1]


def check_one_shot(mod) -> None:
    """一次读写一批：torch 运算的次数不随 token 数增长（逐个 token 的循环，每个 token 至少一次运算）。"""
    gen = torch.Generator().manual_seed(SEED + 1)
    counts = {}
    for n in (2, 40):
        k_buf = torch.zeros(64, 2, 4)
        v_buf = torch.zeros(64, 2, 4)
        slots = torch.randperm(64, generator=gen)[:n]
        k, v = torch.randn(n, 2, 4, generator=gen), torch.randn(n, 2, 4, generator=gen)
        store = torch_ops(mod.store_kv, k_buf, v_buf, k, v, slots)
        gather = torch_ops(mod.gather_kv, k_buf, v_buf, slots, n)
        counts[n] = (store, gather)
    for i, name in enumerate(("store_kv", "gather_kv")):
        few, many = counts[2][i], counts[40][i]
        check(
            len(many) <= len(few) + 2,
            f"{name} 做的 torch 运算次数随 token 数增长：2 个 token 时 {len(few)} 次，40 个时 {len(many)} 次。"
            "这是在逐个 token 循环（先 .tolist() 再逐个读写也是）；要用整数张量做下标（高级索引），一次读写一批行",
        )


def run(mod: object) -> None:
    require(mod, "store_kv")
    require(mod, "gather_kv")
    torch.set_num_threads(1)  # 张量都很小，多线程帮不上忙；几个评测同时跑时反而慢很多

    check_example(mod)
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)
    for _ in range(40):
        simulate(mod, rng, gen)
    check_one_shot(mod)
    check_bad_arguments(mod, random.Random(SEED + 1), torch.Generator().manual_seed(SEED + 2))


if __name__ == "__main__":
    main(run)
