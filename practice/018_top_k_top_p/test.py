"""练习 018 的评测：逐行把留下的 token 集合和一个不排序的参考实现比较（并列很多、k 和 p 各行不同）。

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
from judgekit import bad_int, check, check_tensor, main, mistake_hint, probe_bad_arguments, require, seed, with_bad_item

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
MARGIN = 1e-3  # 测试里的 p 离每个“排在前面的概率之和”至少这么远
NEG_INF = float("-inf")


# ---------------------------------------------------------------------------
# 参考实现：不排序。对一行的每个 token j，ahead[i, j] 表示 token i 排在 j 前面
# （logit 更大，或者一样大但 id 更小）；排名 = 有几个排在它前面；
# “排在前面的概率之和” = 把排在它前面、且留下了的 token 的概率加起来（float64）。
# 关键字参数只用来在出错时猜你错在哪里。
# ---------------------------------------------------------------------------


def ref_row(
    row: torch.Tensor,
    k: int,
    p: float,
    *,
    ties: str = "small_first",
    order: str = "k_then_p",
    crossing: bool = True,
):
    """返回这一行留下的 token（bool [V]），以及 top-p 边界（用来挑安全的 p）。"""
    x = row.double()
    V = x.shape[0]
    ids = torch.arange(V)
    bigger = x[:, None] > x[None, :]
    tie = x[:, None] == x[None, :]
    first = (
        ids[:, None] < ids[None, :]
        if ties == "small_first"
        else ids[:, None] > ids[None, :]
    )
    ahead = bigger | (tie & first)  # ahead[i, j]：i 排在 j 前面
    rank = ahead.sum(dim=0)
    keep_k = rank < (V if k == -1 or k >= V else k)

    basis = keep_k if order == "k_then_p" else torch.ones(V, dtype=torch.bool)
    z = torch.where(basis, x, torch.full_like(x, NEG_INF))
    probs = torch.softmax(z, dim=0)
    mass_ahead = (probs[:, None] * (ahead & basis[:, None])).sum(dim=0)
    boundaries = sorted({round(float(m), 12) for m in mass_ahead[keep_k]} | {1.0})
    if p >= 1:
        keep_p = torch.ones(V, dtype=torch.bool)
    elif crossing:
        keep_p = mass_ahead < p
    else:  # 常见的错：越过 p 的那一个也扔掉了
        keep_p = (mass_ahead + probs < p) | (rank == 0)
    return keep_k & keep_p, boundaries


def ref_filter(logits, top_k, top_p, **kwargs) -> torch.Tensor:
    keep = torch.stack(
        [
            ref_row(logits[b], int(top_k[b]), float(top_p[b]), **kwargs)[0]
            for b in range(logits.shape[0])
        ]
    )
    return keep


# ---------------------------------------------------------------------------
# 随机输入
# ---------------------------------------------------------------------------


def random_logits(gen, rng, B: int, V: int, dtype) -> torch.Tensor:
    kind = rng.choice(["ties", "ties", "normal", "banned"])
    if kind == "normal":
        x = torch.randn(B, V, generator=gen, dtype=torch.float64) * 2
    else:  # 小整数的一半：并列很多
        x = torch.randint(-6, 7, (B, V), generator=gen).double() / 2
    if kind == "banned":  # 有些 token 早就被禁了
        x[torch.rand(B, V, generator=gen) < 0.3] = NEG_INF
        x[:, rng.randrange(V)] = 0.0  # 每行至少一个有限值
    return x.to(dtype)


def safe_p(rng, row, k: int, p_dtype) -> float:
    """挑一个离所有边界都远的 p（按它在 p_dtype 里真正存的值来量）。"""
    _, boundaries = ref_row(row, k, 1.0)
    for _ in range(100):
        p = rng.uniform(0.05, 0.99)
        p = float(torch.tensor(p, dtype=p_dtype))
        if all(abs(p - b) > MARGIN for b in boundaries):
            return p
    return 1.0


def random_case(gen, rng, B: int, V: int):
    dtype = rng.choice([torch.float32, torch.float32, torch.float64])
    logits = random_logits(gen, rng, B, V, dtype)
    ks = [rng.choice([-1, -1, 1, 2, rng.randint(1, V), V, V + 5]) for _ in range(B)]
    p_dtype = rng.choice([torch.float32, torch.float64])
    ps = [
        1.0 if rng.random() < 0.3 else safe_p(rng, logits[b], ks[b], p_dtype)
        for b in range(B)
    ]
    top_k = torch.tensor(ks, dtype=rng.choice([torch.int32, torch.int64]))
    top_p = torch.tensor(ps, dtype=p_dtype)
    return logits, top_k, top_p


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def ids_of(mask: torch.Tensor) -> list[int]:
    return mask.nonzero().flatten().tolist()


def describe_row(logits, top_k, top_p, b: int) -> str:
    row = logits[b].tolist()
    text = (
        repr([round(x, 4) for x in row])
        if len(row) <= 12
        else f"（{len(row)} 个 logit，略）"
    )
    return f"第 {b} 行：logits = {text}，top_k = {int(top_k[b])}，top_p = {float(top_p[b]):.6g}"


def guess_row(logits, top_k, top_p, b: int, got_row: torch.Tensor) -> str:
    guesses = [
        (
            {"order": "p_then_k"},
            "top-p 的概率要在 top-k 剩下的 token 上重新 softmax 再算，你的像是用了全部 token 的概率",
        ),
        (
            {"crossing": False},
            "越过 p 的那个 token 也要留下：留下的是概率之和 >= p 的最短前缀（排在它前面的之和 < p 就留下）",
        ),
        (
            {"ties": "large_first"},
            "logit 并列时要让 id 小的排在前面（torch.sort(..., stable=True)），你的像是 id 大的在前",
        ),
    ]
    hits = []
    for kwargs, why in guesses:
        alt, _ = ref_row(logits[b], int(top_k[b]), float(top_p[b]), **kwargs)
        if torch.equal(alt & (logits[b] != NEG_INF), got_row):
            hits.append(why)
    return mistake_hint(hits)


def check_case(mod, logits, top_k, top_p) -> None:
    inputs = [t.clone() for t in (logits, top_k, top_p)]
    B, V = logits.shape
    call = f"top_k_top_p_filter(logits[{B}, {V}] {logits.dtype}, top_k, top_p)"
    got = mod.top_k_top_p_filter(logits, top_k, top_p)
    check_tensor(got, f"{call} 的返回值", shape=(B, V), dtype=logits.dtype)
    for name, t, orig in zip(
        ("logits", "top_k", "top_p"), (logits, top_k, top_p), inputs
    ):
        check(torch.equal(t, orig), f"{call} 改动了传进来的 {name}，它应该只读")
    want_keep = ref_filter(logits, top_k, top_p)
    for b in range(B):
        context = describe_row(logits, top_k, top_p, b)
        check(
            not bool(torch.isnan(got[b]).any()), f"{call} 的返回值里有 nan\n  {context}"
        )
        # 留下的位置必须是原来的 logit（一位不差），没留下的位置必须是 -inf
        ok = (got[b] == logits[b]) | torch.isneginf(got[b])
        check(
            bool(ok.all()),
            f"{call}：第 {b} 行有的位置既不是原来的 logit、也不是 -inf（比如 token {ids_of(~ok)[:5]}）\n  {context}",
        )
        finite = logits[b] != NEG_INF  # 原来就是 -inf 的 token，留不留都一样
        got_row = (got[b] != NEG_INF) & finite
        want_row = want_keep[b] & finite
        if not torch.equal(got_row, want_row):
            lines = [f"{call}：第 {b} 行留下的 token 不对。", f"  {context}"]
            lines.append(f"  应该留下：{ids_of(want_row)}")
            lines.append(f"  你留下的：{ids_of(got_row)}")
            missing, extra = ids_of(want_row & ~got_row), ids_of(got_row & ~want_row)
            if missing:
                lines.append(f"  少了：{missing[:10]}")
            if extra:
                lines.append(f"  多了：{extra[:10]}")
            check(False, "\n".join(lines) + guess_row(logits, top_k, top_p, b, got_row))


def check_example(mod) -> None:
    logits = torch.tensor([[2.0, 1.0, 3.0, 1.0, 0.0]] * 6)
    top_k = torch.tensor([-1, -1, -1, 3, 3, 1])
    top_p = torch.tensor([1.0, 0.8, 0.85, 1.0, 0.85, 1.0])
    check_case(mod, logits, top_k, top_p)
    # p = 1 表示不限制：第一名几乎占了全部概率，后面的 token 概率小到前缀和在浮点里已经“到了” 1，也要留下
    logits = torch.tensor([[40.0, 0.0, 0.0, -10.0, 1.0]] * 2)
    check_case(mod, logits, torch.tensor([-1, 4]), torch.tensor([1.0, 1.0]))


def check_bad_arguments(mod, gen, rng: random.Random) -> None:
    """坏参数：批大小、词表大小随机；坏的那个 k / p 在随机的一行上，坏值就在边界上或者远一些；
    形状错的 top_k / top_p 有长度不对的，也有多了一维、长度却“对”的。"""

    def spoiled(r, t, spoil):  # t 的一份拷贝，随机一行换成坏值
        return torch.tensor(with_bad_item(r, t.tolist(), spoil), dtype=t.dtype)

    def other_length(r, t):
        n = t.shape[0] + r.choice([-t.shape[0], -1, 1, r.randint(2, 50)])
        return torch.cat([t, t])[:n] if n <= 2 * t.shape[0] else t[:1].repeat(n)

    def call(logits, top_k, top_p):  # 按位置传参
        return mod.top_k_top_p_filter(logits, top_k, top_p)

    for _ in range(2):
        B, V = rng.randint(2, 8), rng.randint(2, 40)
        logits, top_k, top_p = random_case(gen, rng, B, V)
        good = dict(logits=logits, top_k=top_k, top_p=top_p)
        kinds = [
            ("logits", lambda r: r.choice([logits[r.randrange(B)], logits.reshape(-1)])),  # 一维的
            ("logits", lambda r: r.choice([logits.unsqueeze(0), logits.unsqueeze(-1)])),  # 三维的
            ("top_k", lambda r: other_length(r, top_k)), ("top_p", lambda r: other_length(r, top_p)),  # 长度和行数对不上
            # [1, B] 和 [B, 1] 各试一次：[B, 1] 的 len() 恰好是 B，只比长度的检查看不出来，不能靠抽签碰上
            ("top_k", lambda r: top_k.unsqueeze(0)), ("top_k", lambda r: top_k.unsqueeze(1)),
            ("top_p", lambda r: top_p.unsqueeze(0)), ("top_p", lambda r: top_p.unsqueeze(1)),
            ("top_k", lambda r: spoiled(r, top_k, lambda k, r: 0)),  # 某个 k 是 0
            ("top_k", lambda r: spoiled(r, top_k, lambda k, r: bad_int(r, -1))),  # 某个 k 小于 -1
            ("top_p", lambda r: spoiled(r, top_p, lambda p, r: r.choice([0.0, -r.random(), -r.randint(1, 100)]))),
            ("top_p", lambda r: spoiled(r, top_p, lambda p, r: r.choice([1.0001, 1.5, float(r.randint(2, 100))]))),
            ("top_p", lambda r: spoiled(r, top_p, lambda p, r: float("nan"))),
        ]
        for key, spoil in kinds:
            probe_bad_arguments(call, good, {key: spoil}, rng, name="top_k_top_p_filter", tries=1)


def run(mod: object) -> None:
    require(mod, "top_k_top_p_filter")
    torch.set_num_threads(1)  # 张量都很小，多线程帮不上忙；几个评测同时跑时反而慢很多
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)

    check_example(mod)
    for _ in range(60):
        check_case(mod, *random_case(gen, rng, rng.randint(1, 8), rng.randint(2, 48)))
    for V in (1, 1000):  # 只有一个 token 的词表；大一点的词表
        check_case(mod, *random_case(gen, rng, 3, V))
    check_bad_arguments(mod, gen, random.Random(SEED + 1))


if __name__ == "__main__":
    main(run)
