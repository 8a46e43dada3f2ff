"""练习 017 的评测：补齐 + 键掩码的一次性 decode 注意力，和逐个请求手算的参考实现比较；
补齐位置里塞很大的随机数，换一批也不能影响结果；还会数 SDPA 被调用了几次，以及 padded_attention 里
torch 运算的次数（换成更大的批、更多的头也不能变：不许按请求、按头循环）。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(
    0, str(Path(__file__).resolve().parent.parent)
)  # 找到 practice/judgekit.py
from judgekit import (
    seed,
    bad_int,
    mistake_hint,
    probe_bad_arguments,
    with_bad_item,
    CheckFailed,
    check,
    check_close,
    check_tensor,
    main,
    require,
    torch_calls,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
GARBAGE = 300.0  # 补齐位置、没用到的槽位里的数有这么大：没挡住一定看得出来


# ---------------------------------------------------------------------------
# 参考实现：逐个请求、逐个头，只拿真实的 key，float64 手算 softmax
# ---------------------------------------------------------------------------


def ref_one(qv, keys, vals, *, head_map="interleave", scale=None):
    """一个请求：qv [Hq, D]，keys/vals [n, Hkv, D] → [Hq, D]（float64）。"""
    num_heads, head_dim = qv.shape
    num_kv_heads = keys.shape[1]
    group = num_heads // num_kv_heads
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    out = torch.zeros(num_heads, head_dim, dtype=torch.float64)
    for h in range(num_heads):
        kv = h // group if head_map == "interleave" else h % num_kv_heads
        scores = [float(s) * scale for s in keys[:, kv].double() @ qv[h].double()]
        top = max(scores)
        weights = [math.exp(s - top) for s in scores]
        total = sum(weights)
        out[h] = (
            torch.tensor([w / total for w in weights], dtype=torch.float64)
            @ vals[:, kv].double()
        )
    return out


def ref_padded(q, k, v, valid, *, use_mask=True, **kwargs):
    rows = []
    for b in range(q.shape[0]):
        n = int(valid[b].sum()) if use_mask else k.shape[1]
        rows.append(ref_one(q[b], k[b, :n], v[b, :n], **kwargs))
    return torch.stack(rows).to(q.dtype)


def ref_decode(q, k_buf, v_buf, page_table, table_idx, seq_lens, **kwargs):
    table = page_table.tolist()
    rows = []
    for b, (row, n) in enumerate(zip(table_idx, seq_lens)):
        slots = table[row][:n]
        rows.append(ref_one(q[b], k_buf[slots], v_buf[slots], **kwargs))
    return torch.stack(rows).to(q.dtype)


# ---------------------------------------------------------------------------
# 数 SDPA 的调用次数
# ---------------------------------------------------------------------------


TO_PYTHON = {"tolist", "item", "numpy", "__float__", "__int__", "__array__"}


def torch_ops(mod, seq_lens, hq, hkv, d, gen) -> list[str]:
    q, k, v, valid = random_padded(gen, seq_lens, hq, hkv, d, torch.float32)
    return torch_calls(mod.padded_attention, q, k, v, valid)[1]


def check_whole_batch(mod, gen) -> None:
    """整批一次算：torch 运算的次数不随请求数、头数、序列长度增长，也不把数取到 Python 里算。"""
    small = ([2, 5], 4, 2, 8)
    big = ([40, 1, 17, 33, 9, 40, 2, 25, 12], 12, 6, 8)  # 请求多、头多、序列长；GQA 分组一样
    few, many = torch_ops(mod, *small, gen), torch_ops(mod, *big, gen)
    pulled = sorted(TO_PYTHON.intersection(few + many))
    check(
        not pulled,
        f"padded_attention 用了 {', '.join(pulled)}：把张量里的数取到 Python 里自己算了。"
        "这道题要整批一次交给 torch 算（一次 SDPA，或者批量的 einsum / matmul）",
    )
    check(
        len(many) <= len(few) + 2,
        f"padded_attention 做的 torch 运算次数随批的大小增长：2 个请求、4 个头、最长 5 个 key 时 {len(few)} 次，"
        f"9 个请求、12 个头、最长 40 个 key 时 {len(many)} 次。\n"
        "  这是在按请求、按头（或按位置）循环。要把整批补齐以后一次算完："
        "一次 scaled_dot_product_attention，或者一次批量的 einsum / matmul 加 softmax",
    )


def check_uses_padded(mod, pool: "Pool") -> None:
    """decode_attention 要把 gather_padded 和 padded_attention 接起来，不要另写一套。"""
    original, calls = mod.padded_attention, []

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    mod.padded_attention = spy
    try:
        mod.decode_attention(*pool.args())
    finally:
        mod.padded_attention = original
    check(
        len(calls) == 1,
        f"decode_attention 调用了 {len(calls)} 次 padded_attention（这一批有 {len(pool.seq_lens)} 个请求）："
        "它应该用 gather_padded 补齐整批，再调用一次 padded_attention",
    )


SDPA = "scaled_dot_product_attention"


def check_one_call(calls: int, what: str, B: int) -> None:
    check(
        calls <= 1,
        f"{what} 调用了 {calls} 次 scaled_dot_product_attention（这一批有 {B} 个请求）："
        "要把整批补齐以后一次算完，不要按请求循环",
    )


# ---------------------------------------------------------------------------
# 检查 padded_attention：补齐位置里是很大的随机数
# ---------------------------------------------------------------------------


def random_padded(gen, seq_lens, hq, hkv, d, dtype):
    B, L = len(seq_lens), max(seq_lens)
    q = torch.randn(B, hq, d, generator=gen, dtype=torch.float64).to(dtype)
    k = torch.randn(B, L, hkv, d, generator=gen, dtype=torch.float64)
    v = torch.randn(B, L, hkv, d, generator=gen, dtype=torch.float64)
    valid = torch.arange(L)[None, :] < torch.tensor(seq_lens)[:, None]
    return q, k.to(dtype), v.to(dtype), valid


def fill_padding(gen, t: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    garbage = (
        torch.rand(t.shape, generator=gen, dtype=torch.float64) * 2 - 1
    ) * GARBAGE
    out = t.clone()
    pad = ~valid
    out[pad] = garbage.to(t.dtype)[pad]
    return out


def guess_padded(got, q, k, v, valid) -> str:
    d = q.shape[-1]
    guesses = [
        (
            {"use_mask": False},
            "补出来的位置没挡住：它们也参与了 softmax（检查 attn_mask / masked_fill）",
        ),
        (
            {"head_map": "modulo"},
            "GQA 的分组不对：query 头 h 应该用 KV 头 h // group（repeat_interleave），你的像是 h % Hkv",
        ),
        ({"scale": 1.0}, "像是忘了乘 D ** -0.5"),
        ({"scale": 1.0 / d}, "缩放应该是 D ** -0.5，你的像是 1/D"),
    ]
    hits = [why for kwargs, why in guesses
            if torch.allclose(got.double(), ref_padded(q, k, v, valid, **kwargs).double(), atol=1e-4, rtol=1e-4)]
    return mistake_hint(hits)


def check_padded(mod, gen, seq_lens, hq, hkv, d, dtype) -> None:
    q, k, v, valid = random_padded(gen, seq_lens, hq, hkv, d, dtype)
    context = f"seq_lens={seq_lens}，Hq={hq}、Hkv={hkv}、D={d}，{dtype}"
    want = ref_padded(q, k, v, valid)
    what = "padded_attention(q, k, v, valid) 的返回值"
    for attempt in range(2):  # 两批不同的“垃圾”：结果都必须一样
        kg, vg = fill_padding(gen, k, valid), fill_padding(gen, v, valid)
        inputs = [t.clone() for t in (q, kg, vg, valid)]
        got, names = torch_calls(mod.padded_attention, q, kg, vg, valid)
        try:
            check_tensor(got, what, shape=(len(seq_lens), hq, d), dtype=dtype)
        except CheckFailed as e:
            raise CheckFailed(f"{e}\n  输入：{context}") from None
        for name, t, orig in zip(("q", "k", "v", "valid"), (q, kg, vg, valid), inputs):
            check(
                torch.equal(t, orig),
                f"padded_attention 改动了传进来的 {name}，它应该只读\n  输入：{context}",
            )
        check_one_call(names.count(SDPA), "padded_attention", len(seq_lens))
        try:
            check_close(got, want, what, atol=1e-5, rtol=1e-4)
        except CheckFailed as e:
            b = int(
                (
                    ~torch.isclose(got.double(), want.double(), atol=1e-5, rtol=1e-4)
                ).nonzero()[0, 0]
            )
            where = f"\n  第一个出错的是第 {b} 个请求（{seq_lens[b]} 个真实的 key，补到 {max(seq_lens)}）"
            if attempt == 1:
                where += "；补齐位置换了一批随机数，结果就变了——补出来的位置没完全挡住"
            raise CheckFailed(
                f"{e}{where}\n  输入：{context}" + guess_padded(got, q, kg, vg, valid)
            ) from None


# ---------------------------------------------------------------------------
# 检查 gather_padded 和 decode_attention：在随机的 KV 池上
# ---------------------------------------------------------------------------


class Pool:
    def __init__(self, gen, rng, seq_lens, hq, hkv, d, dtype):
        self.seq_lens, self.hq, self.hkv, self.d, self.dtype = (
            list(seq_lens),
            hq,
            hkv,
            d,
            dtype,
        )
        B = len(seq_lens)
        page_size = rng.choice([1, 2, 4, 16])
        num_pages = sum(-(-n // page_size) for n in seq_lens) + rng.randint(1, 3)
        num_slots = num_pages * page_size
        free = list(range(num_pages))
        rng.shuffle(free)
        num_rows = B + rng.randint(0, 2)
        max_len = max(seq_lens) + rng.randint(0, 4)
        table = [
            [rng.randrange(num_slots) for _ in range(max_len)] for _ in range(num_rows)
        ]
        self.table_idx = rng.sample(range(num_rows), B)
        used = set()
        for row, n in zip(self.table_idx, seq_lens):
            for pos in range(n):
                if pos % page_size == 0:
                    page = free.pop()
                table[row][pos] = page * page_size + pos % page_size
                used.add(table[row][pos])
        self.page_table = torch.tensor(
            table, dtype=rng.choice([torch.int32, torch.int64])
        )
        self.q = torch.randn(B, hq, d, generator=gen, dtype=torch.float64).to(dtype)
        k = torch.randn(num_slots, hkv, d, generator=gen, dtype=torch.float64)
        v = torch.randn(num_slots, hkv, d, generator=gen, dtype=torch.float64)
        unused = torch.tensor([s not in used for s in range(num_slots)])
        k[unused] *= GARBAGE  # 没人用的槽位：很大的旧数据
        v[unused] *= GARBAGE
        self.k_buf, self.v_buf = k.to(dtype), v.to(dtype)
        self.page_size = page_size

    def args(self):
        return (
            self.q,
            self.k_buf,
            self.v_buf,
            self.page_table,
            list(self.table_idx),
            list(self.seq_lens),
        )

    def describe(self) -> str:
        return (
            f"seq_lens={self.seq_lens}，table_idx={self.table_idx}，Hq={self.hq}、Hkv={self.hkv}、D={self.d}，"
            f"{self.dtype}，page_size={self.page_size}"
        )


def check_gather(mod, pool: Pool) -> None:
    context = pool.describe()
    _, k_buf, v_buf, table, idx, seq_lens = pool.args()
    got = mod.gather_padded(k_buf, v_buf, table, idx, seq_lens)
    call = "gather_padded(k_buf, v_buf, page_table, table_idx, seq_lens)"
    check(
        isinstance(got, tuple) and len(got) == 3,
        f"{call} 应该返回 (k, v, valid) 三个张量组成的 tuple，你返回的是 {type(got).__name__}",
    )
    B, L = len(seq_lens), max(seq_lens)
    k, v, valid = got
    shape = (B, L, pool.hkv, pool.d)
    check_tensor(k, f"{call} 返回的 k", shape=shape, dtype=pool.dtype)
    check_tensor(v, f"{call} 返回的 v", shape=shape, dtype=pool.dtype)
    check_tensor(valid, f"{call} 返回的 valid", shape=(B, L), dtype=torch.bool)
    want_valid = torch.tensor([[j < n for j in range(L)] for n in seq_lens])
    if not torch.equal(valid, want_valid):
        b = int((valid != want_valid).any(dim=1).nonzero()[0])
        check(
            False,
            f"{call} 返回的 valid 不对：第 {b} 个请求有 {seq_lens[b]} 个 key，"
            f"应该是 {want_valid[b].int().tolist()}，你的是 {valid[b].int().tolist()}\n  输入：{context}",
        )
    rows = table.tolist()
    for b, (row, n) in enumerate(zip(idx, seq_lens)):
        slots = rows[row][:n]
        for name, got_t, buf in (("k", k, k_buf), ("v", v, v_buf)):
            if not torch.equal(got_t[b, :n], buf[slots]):
                j = int(
                    (got_t[b, :n] != buf[slots]).reshape(n, -1).any(dim=1).nonzero()[0]
                )
                check(
                    False,
                    f"{call} 返回的 {name}[{b}, {j}] 不对：应该是槽位 page_table[table_idx[{b}], {j}] = {slots[j]} 的内容"
                    f"\n  输入：{context}",
                )


def check_decode(mod, pool: Pool) -> None:
    context = pool.describe()
    inputs = [t.clone() for t in pool.args()[:4]]
    got, names = torch_calls(mod.decode_attention, *pool.args())
    what = "decode_attention(...) 的返回值"
    try:
        check_tensor(
            got, what, shape=(len(pool.seq_lens), pool.hq, pool.d), dtype=pool.dtype
        )
    except CheckFailed as e:
        raise CheckFailed(f"{e}\n  输入：{context}") from None
    for name, t, orig in zip(
        ("q", "k_buf", "v_buf", "page_table"), pool.args()[:4], inputs
    ):
        check(
            torch.equal(t, orig),
            f"decode_attention 改动了传进来的 {name}，它应该只读\n  输入：{context}",
        )
    check_one_call(names.count(SDPA), "decode_attention", len(pool.seq_lens))
    want = ref_decode(*pool.args())
    try:
        check_close(got, want, what, atol=1e-5, rtol=1e-4)
    except CheckFailed as e:
        b = int(
            (
                ~torch.isclose(got.double(), want.double(), atol=1e-5, rtol=1e-4)
            ).nonzero()[0, 0]
        )
        raise CheckFailed(
            f"{e}\n  第一个出错的是第 {b} 个请求（{pool.seq_lens[b]} 个 key）\n  输入：{context}"
        ) from None


def other_length(r, items, make):
    """items 的长度变一变：少几个（可能一个不剩）或者多几个。"""
    if r.random() < 0.5:
        return list(items[: r.randrange(len(items))])
    return list(items) + [make(r) for _ in range(r.choice([1, r.randint(2, 20)]))]


def check_bad_arguments(mod, gen, rng) -> None:
    """坏参数：请求个数、长度、头数都随机；坏的 seq_len 在随机的位置上，就在边界上或者远一些；
    列表长度少几个或者多几个；query 头数比 KV 头数少、多，但都不是它的倍数。"""
    def call(q, k_buf, v_buf, page_table, table_idx, seq_lens):  # 按位置传参
        return mod.decode_attention(q, k_buf, v_buf, page_table, table_idx, seq_lens)

    for _ in range(2):
        hkv = rng.choice([2, 3, 4])
        seq_lens = [rng.randint(1, 40) for _ in range(rng.randint(4, 8))]
        pool = Pool(gen, rng, seq_lens, hkv * rng.choice([1, 2, 3]), hkv, rng.choice([4, 8]), torch.float32)
        q, k_buf, v_buf, table, idx, lens = pool.args()
        max_len = table.shape[1]
        good = dict(q=q, k_buf=k_buf, v_buf=v_buf, page_table=table, table_idx=idx, seq_lens=lens)
        heads = [h for h in range(1, 3 * pool.hq + 1) if h % hkv]  # 不是 Hkv 倍数的 query 头数
        kinds = [
            ("table_idx", lambda r: other_length(r, idx, lambda r: r.randrange(table.shape[0]))),
            ("seq_lens", lambda r: other_length(r, lens, lambda r: r.randint(1, max_len))),
            ("seq_lens", lambda r: with_bad_item(r, lens, lambda n, r: bad_int(r, 1))),  # 0 或负数
            ("seq_lens", lambda r: with_bad_item(r, lens, lambda n, r: max_len + 1)),  # 刚好超过页表的列数
            ("seq_lens", lambda r: with_bad_item(r, lens, lambda n, r: max_len + r.randint(2, 1000))),
            ("q", lambda r: q.repeat(1, 3, 1)[:, : r.choice(heads)]),
        ]
        for key, spoil in kinds:
            probe_bad_arguments(call, good, {key: spoil}, rng, name="decode_attention", tries=1)


def random_shapes(rng: random.Random):
    hkv = rng.choice([1, 2, 4])
    seq_lens = [rng.choice([1, rng.randint(1, 60)]) for _ in range(rng.randint(1, 8))]
    hq = hkv * rng.choice([1, 2, 3, 4])
    return (
        seq_lens,
        hq,
        hkv,
        rng.choice([8, 16, 32]),
        rng.choice([torch.float32, torch.float64]),
    )


def run(mod: object) -> None:
    for name in ("gather_padded", "padded_attention", "decode_attention"):
        require(mod, name)
    torch.set_num_threads(1)  # 张量都很小，多线程帮不上忙；几个评测同时跑时反而慢很多
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)
    f32 = torch.float32
    fixed = [
        ([3, 1, 5], 2, 2, 4, f32),  # 题目里的例子
        ([1, 200], 4, 2, 16, f32),  # 长度相差悬殊
        ([200, 1, 37], 9, 3, 64, f32),  # SmolLM2 的头布局：9 个 query 头、3 个 KV 头
        ([7], 16, 8, 32, f32),  # tiny Qwen3 的头布局，只有一个请求
    ]
    shapes = fixed + [random_shapes(rng) for _ in range(12)]

    # 先是 gather_padded，再是补齐位置塞了“垃圾”的 padded_attention，最后整条 decode_attention
    pools = [Pool(gen, rng, *shape) for shape in shapes]
    for pool in pools:
        check_gather(mod, pool)
    for shape in shapes:
        check_padded(mod, gen, *shape)
    check_whole_batch(mod, gen)
    for pool in pools:
        check_decode(mod, pool)
    check_uses_padded(mod, pools[2])
    check_bad_arguments(mod, gen, rng)


if __name__ == "__main__":
    main(run)
