"""练习 016 的评测：变长、带缓存前缀、槽位打乱的 prefill 批，和逐 token 逐头手算的参考实现比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import torch

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
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


# ---------------------------------------------------------------------------
# 参考实现：不造掩码、不复制 KV 头、不用 SDPA。逐个新 token、逐个头，
# 按页表一个槽位一个槽位地找出它“能看见”的 key，float64 手算 softmax。
# 关键字参数只用来在出错时猜你错在哪里。
# ---------------------------------------------------------------------------


def ref_attention(
    q,
    k_buf,
    v_buf,
    page_table,
    table_idx,
    cached_lens,
    extend_lens,
    *,
    mask: str = "bottom_right",
    head_map: str = "interleave",
    scale: float | None = None,
    keys: str = "all",
):
    T, num_heads, head_dim = q.shape
    num_kv_heads = k_buf.shape[1]
    group = num_heads // num_kv_heads
    if scale is None:
        scale = 1.0 / math.sqrt(head_dim)
    q64, k64, v64 = q.double(), k_buf.double(), v_buf.double()
    table = page_table.tolist()
    out = torch.zeros(T, num_heads, head_dim, dtype=torch.float64)
    t = 0
    for row, cached, ext in zip(table_idx, cached_lens, extend_lens):
        first = (
            cached if keys == "new_only" else 0
        )  # "new_only"：忘了缓存前缀，只看这一步的新 token
        for i in range(ext):
            if mask == "bottom_right":
                last = cached + i  # 第 i 个新 token 的绝对位置
            elif mask == "top_left":
                last = i
            else:  # "none"
                last = cached + ext - 1
            slots = [table[row][pos] for pos in range(first, last + 1)]
            for h in range(num_heads):
                kv = h // group if head_map == "interleave" else h % num_kv_heads
                scores = [float(s) * scale for s in k64[slots, kv] @ q64[t, h]]
                top = max(scores)
                weights = [math.exp(s - top) for s in scores]
                total = sum(weights)
                probs = torch.tensor([w / total for w in weights], dtype=torch.float64)
                out[t, h] = probs @ v64[slots, kv]
            t += 1
    return out.to(q.dtype)


# ---------------------------------------------------------------------------
# 随机的批
# ---------------------------------------------------------------------------


class Case:
    def __init__(
        self, gen, rng, cached_lens, extend_lens, hq, hkv, d, dtype, page_size=None
    ):
        self.cached_lens, self.extend_lens = list(cached_lens), list(extend_lens)
        self.hq, self.hkv, self.d, self.dtype = hq, hkv, d, dtype
        n = len(cached_lens)
        totals = [c + e for c, e in zip(cached_lens, extend_lens)]
        self.page_size = page_size or rng.choice([1, 2, 4, 16])
        pages_needed = sum(-(-tot // self.page_size) for tot in totals)
        num_pages = pages_needed + rng.randint(
            1, 4
        )  # 多出来几页：没人用的槽位里也是随机数
        free = list(range(num_pages))
        rng.shuffle(free)
        num_rows = n + rng.randint(0, 3)
        max_len = max(totals) + rng.randint(0, 5)
        num_slots = num_pages * self.page_size
        # 页表里没用到的格子填随机槽位：读多了一定看得出来
        table = [
            [rng.randrange(num_slots) for _ in range(max_len)] for _ in range(num_rows)
        ]
        self.table_idx = rng.sample(range(num_rows), n)  # 请求 i 不一定在第 i 行
        for row, tot in zip(self.table_idx, totals):
            for pos in range(tot):
                if pos % self.page_size == 0:
                    page = free.pop()
                table[row][pos] = page * self.page_size + pos % self.page_size
        self.page_table = torch.tensor(
            table, dtype=rng.choice([torch.int32, torch.int64])
        )
        T = sum(extend_lens)
        self.q = torch.randn(T, hq, d, generator=gen, dtype=torch.float64).to(dtype)
        self.k_buf = torch.randn(
            num_slots, hkv, d, generator=gen, dtype=torch.float64
        ).to(dtype)
        self.v_buf = torch.randn(
            num_slots, hkv, d, generator=gen, dtype=torch.float64
        ).to(dtype)

    def args(self):
        return (
            self.q,
            self.k_buf,
            self.v_buf,
            self.page_table,
            list(self.table_idx),
            list(self.cached_lens),
            list(self.extend_lens),
        )

    def describe(self) -> str:
        return (
            f"{len(self.cached_lens)} 个请求，cached_lens={self.cached_lens}，extend_lens={self.extend_lens}，"
            f"table_idx={self.table_idx}；Hq={self.hq}、Hkv={self.hkv}、D={self.d}，{self.dtype}，"
            f"page_size={self.page_size}"
        )


def guess_mistake(got: torch.Tensor, case: Case) -> str:
    guesses = [
        (
            {"mask": "top_left"},
            "掩码是左上角对齐的（tril / is_causal=True）；有缓存前缀时要右下角对齐",
        ),
        (
            {"mask": "none"},
            "像是根本没加因果掩码：每个新 token 都看见了这个请求的全部 key",
        ),
        (
            {"keys": "new_only"},
            "像是只用了这一步新 token 的 K/V，忘了缓存前缀（key 要从位置 0 开始取）",
        ),
        (
            {"head_map": "modulo"},
            "GQA 的分组不对：query 头 h 应该用 KV 头 h // group（repeat_interleave），你的像是 h % Hkv（repeat）",
        ),
        ({"scale": 1.0}, "像是忘了乘 D ** -0.5"),
        ({"scale": 1.0 / case.d}, "缩放应该是 D ** -0.5，你的像是 1/D"),
    ]
    hits = []
    for kwargs, why in guesses:
        alt = ref_attention(*case.args(), **kwargs)
        if torch.allclose(got.double(), alt.double(), atol=1e-4, rtol=1e-4):
            hits.append(why)
    n = len(case.cached_lens)
    args = list(case.args())
    args[4] = list(range(n))
    if case.table_idx != list(range(n)) and n <= case.page_table.shape[0]:
        alt = ref_attention(*args)
        if torch.allclose(got.double(), alt.double(), atol=1e-4, rtol=1e-4):
            hits.append("第 i 个请求用了页表的第 i 行；应该用第 table_idx[i] 行")
    return mistake_hint(hits)


def check_case(attention, case: Case) -> None:
    context = case.describe()
    originals = [t.clone() for t in (case.q, case.k_buf, case.v_buf, case.page_table)]
    T = case.q.shape[0]
    what = "paged_prefill_attention(...) 的返回值"
    got = attention(*case.args())
    try:
        check_tensor(got, what, shape=(T, case.hq, case.d), dtype=case.dtype)
    except CheckFailed as e:
        raise CheckFailed(f"{e}\n  输入：{context}") from None
    for name, t, orig in zip(
        ("q", "k_buf", "v_buf", "page_table"),
        (case.q, case.k_buf, case.v_buf, case.page_table),
        originals,
    ):
        check(
            torch.equal(t, orig),
            f"paged_prefill_attention 改动了传进来的 {name}，它应该只读\n  输入：{context}",
        )
    want = ref_attention(*case.args())
    try:
        check_close(got, want, what, atol=1e-5, rtol=1e-4)
    except CheckFailed as e:
        t = int(
            (
                ~torch.isclose(got.double(), want.double(), atol=1e-5, rtol=1e-4)
            ).nonzero()[0, 0]
        )
        req = 0
        while t >= sum(case.extend_lens[: req + 1]):
            req += 1
        where = (
            f"\n  第一个出错的是拼接序列第 {t} 行：第 {req} 个请求的第 {t - sum(case.extend_lens[:req])} 个新 token"
            f"（缓存前缀 {case.cached_lens[req]}，它的位置是 {case.cached_lens[req] + t - sum(case.extend_lens[:req])}）"
        )
        raise CheckFailed(
            f"{e}{where}\n  输入：{context}" + guess_mistake(got, case)
        ) from None


def other_length(r, items, make):
    """items 的长度变一变：少几个（可能一个不剩）或者多几个。"""
    if r.random() < 0.5:
        return list(items[: r.randrange(len(items))])
    return list(items) + [make(r) for _ in range(r.choice([1, r.randint(2, 20)]))]


def check_bad_arguments(attention, gen, rng) -> None:
    """坏参数：请求个数、长度、头数都随机；坏的那个请求在随机的位置上，坏值就在边界上或者远一些；
    列表长度少几个或者多几个；q 的行数少几行或者多几行；query 头数不是 KV 头数的倍数。"""

    def call(q, k_buf, v_buf, page_table, table_idx, cached_lens, extend_lens):  # 按位置传参
        return attention(q, k_buf, v_buf, page_table, table_idx, cached_lens, extend_lens)

    def fitted(q, k_buf, v_buf, page_table, table_idx, cached_lens, extend_lens):
        # extend_lens 是坏的时候，q 的行数跟着它走：只有 extend_len 这一处不对
        return attention(q[: sum(extend_lens)], k_buf, v_buf, page_table, table_idx, cached_lens, extend_lens)

    for _ in range(2):
        n = rng.randint(3, 6)
        hkv = rng.choice([2, 3, 4])
        case = Case(gen, rng, [rng.choice([0, rng.randint(1, 20)]) for _ in range(n)],
                    [rng.randint(1, 8) for _ in range(n)], hkv * rng.choice([1, 2, 3]), hkv, rng.choice([4, 8]),
                    torch.float32)
        q, k_buf, v_buf, table, idx, cached, ext = case.args()
        T, width = q.shape[0], table.shape[1]
        good = dict(q=q, k_buf=k_buf, v_buf=v_buf, page_table=table, table_idx=idx, cached_lens=cached,
                    extend_lens=ext)
        heads = [h for h in range(1, 3 * case.hq + 1) if h % hkv]  # 不是 Hkv 倍数的 query 头数

        spots = iter(rng.sample([0, rng.randrange(1, n - 1), n - 1], 3))  # 开头、中间、末尾各一次，顺序随机

        def overflow(r):  # 一个请求的 cached_len + extend_len 刚好或者远远超过页表的列数
            out, i = list(cached), next(spots)
            out[i] = width - ext[i] + r.choice([1, r.randint(2, 1000)])
            return out

        def no_new_tokens(r):  # 随机一个请求的 extend_len 是 0 或负数（加起来可能还是 >= 0）
            out, i = list(ext), r.randrange(n)
            out[i] = r.choice([0, -r.randint(1, T - ext[i])]) if T > ext[i] else 0
            return out

        # (参数, 坏值, 试几次)：坏的请求位置随机的几种多试几次，只查第一个 / 最后一个请求的代码过不去
        kinds = [
            ("q", lambda r: r.choice([q[: T - r.randint(1, T)], torch.cat([q, q[: r.randint(1, T)]])]), 1),
            ("q", lambda r: q.repeat(1, 3, 1)[:, : r.choice(heads)], 1),
            ("table_idx", lambda r: other_length(r, idx, lambda r: r.randrange(table.shape[0])), 1),
            ("cached_lens", lambda r: other_length(r, cached, lambda r: 0), 1),
            ("extend_lens", lambda r: other_length(r, ext, lambda r: 1), 1),
            ("cached_lens", lambda r: with_bad_item(r, cached, lambda c, r: bad_int(r, 0)), 3),  # 负数
            ("cached_lens", overflow, 3),
        ]
        for key, spoil, tries in kinds:
            probe_bad_arguments(call, good, {key: spoil}, rng, name="paged_prefill_attention", tries=tries)
        probe_bad_arguments(fitted, good, {"extend_lens": no_new_tokens}, rng, name="paged_prefill_attention",
                            tries=3)


def run(mod: object) -> None:
    attention = require(mod, "paged_prefill_attention")
    torch.set_num_threads(1)  # 张量都很小，多线程帮不上忙；几个评测同时跑时反而慢很多
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)
    f32 = torch.float32

    fixed = [
        ([0], [4], 2, 2, 4),  # 没有缓存的 prefill：左上、右下两种掩码一样
        ([3, 0], [2, 3], 2, 1, 8),  # 题目里的例子：请求 0 带 3 个 token 的缓存前缀
        ([6], [1], 4, 2, 8),  # 只送 1 个 token（像 decode）
        (
            [5, 0, 12],
            [3, 4, 1],
            9,
            3,
            64,
        ),  # SmolLM2 的头布局：9 个 query 头、3 个 KV 头
        ([0, 7], [5, 6], 16, 8, 32),  # tiny Qwen3 的头布局：16 对 8
    ]
    for cached, ext, hq, hkv, d in fixed:
        check_case(attention, Case(gen, rng, cached, ext, hq, hkv, d, f32))
    for _ in range(40):
        n = rng.randint(1, 4)
        cached = [rng.choice([0, rng.randint(1, 30)]) for _ in range(n)]
        ext = [rng.choice([1, rng.randint(1, 12)]) for _ in range(n)]
        if not any(
            c > 0 and e > 1 for c, e in zip(cached, ext)
        ):  # 每批都有“带缓存、多个新 token”的请求
            cached[0], ext[0] = rng.randint(1, 30), rng.randint(2, 12)
        hkv = rng.choice([1, 2, 4])
        hq = hkv * rng.choice([1, 2, 3, 4])
        d = rng.choice([4, 8, 16, 32])
        dtype = rng.choice([f32, f32, torch.float64])
        check_case(attention, Case(gen, rng, cached, ext, hq, hkv, d, dtype))
    check_bad_arguments(attention, gen, rng)


if __name__ == "__main__":
    main(run)
