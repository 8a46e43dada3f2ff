"""练习 019 的评测：贪心行必须是 argmax；同一个种子结果一样；把几种参数组合各复制几千行，
数频率，和参考概率做卡方检验（固定种子，结论是确定的）。

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
    mistake_hint,
    probe_bad_arguments,
    with_bad_item,
    CheckFailed,
    check,
    check_equal,
    check_tensor,
    main,
    require,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
NEG_INF = float("-inf")
DRAWS = 4000  # 统计检验里每种参数组合复制的行数


# ---------------------------------------------------------------------------
# 参考实现：不排序的 top-k / top-p（和第 18 题的评测同一个思路），概率用 float64
# ---------------------------------------------------------------------------


def ref_keep(x: torch.Tensor, k: int, p: float) -> torch.Tensor:
    """一行 float64 logits 过滤后留下的 token（bool [V]）。"""
    V = x.shape[0]
    ids = torch.arange(V)
    ahead = (x[:, None] > x[None, :]) | (
        (x[:, None] == x[None, :]) & (ids[:, None] < ids[None, :])
    )
    rank = ahead.sum(dim=0)
    keep = rank < (V if k == -1 or k >= V else k)
    if p >= 1:
        return keep
    probs = torch.softmax(torch.where(keep, x, torch.full_like(x, NEG_INF)), dim=0)
    mass_ahead = (probs[:, None] * (ahead & keep[:, None])).sum(dim=0)
    return keep & (mass_ahead < p)


def ref_probs(
    row: torch.Tensor, t: float, k: int, p: float, *, order: str = "temp_first"
) -> torch.Tensor:
    """采样行的目标分布（float64）。order 只用来在出错时猜你错在哪里。"""
    x = row.double()
    if order == "temp_first":
        keep = ref_keep(x / t, k, p)
        z = x / t
    elif order == "filter_first":  # 先过滤、后除以温度
        keep = ref_keep(x, k, p)
        z = x / t
    else:  # "no_temp"：忘了温度
        keep = ref_keep(x, k, p)
        z = x
    return torch.softmax(torch.where(keep, z, torch.full_like(z, NEG_INF)), dim=0)


def ref_argmax(row: torch.Tensor) -> int:
    values = row.tolist()
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:  # 严格大于：并列时留下 id 小的
            best = i
    return best


def chi_square(counts: list[int], probs: list[float]) -> tuple[float, int]:
    """卡方统计量和自由度；期望次数 < 5 的格子合并成一格。"""
    n = sum(counts)
    cells, small_obs, small_exp = [], 0, 0.0
    for c, q in zip(counts, probs):
        if n * q >= 5:
            cells.append((c, n * q))
        else:
            small_obs += c
            small_exp += n * q
    if small_exp > 0 or small_obs > 0:
        cells.append((small_obs, small_exp))
    stat = sum(
        (o - e) ** 2 / e if e > 0 else (math.inf if o else 0.0) for o, e in cells
    )
    return stat, max(len(cells) - 1, 1)


def away_from_boundaries(x: torch.Tensor, k: int, p: float) -> float:
    """把 p 挪开，离每个“排在前面的概率之和”都至少 1e-3：浮点误差不会改变留下的集合。"""
    if p >= 1:
        return p
    V = x.shape[0]
    ids = torch.arange(V)
    ahead = (x[:, None] > x[None, :]) | (
        (x[:, None] == x[None, :]) & (ids[:, None] < ids[None, :])
    )
    keep = ahead.sum(dim=0) < (V if k == -1 or k >= V else k)
    probs = torch.softmax(torch.where(keep, x, torch.full_like(x, NEG_INF)), dim=0)
    bounds = (probs[:, None] * (ahead & keep[:, None])).sum(dim=0)[keep].tolist()
    while any(abs(p - b) < 1e-3 for b in bounds):
        p -= 0.01
    return p


def chi_bound(df: int) -> float:
    # 自由度 df 的卡方分布：均值 df、标准差 sqrt(2 df)。这条界宽到正确的实现几乎不可能超过
    return df + 8 * math.sqrt(2 * df) + 10


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def call_sample(mod, logits, temps, top_k, top_p, seed: int) -> torch.Tensor:
    inputs = [t.clone() for t in (logits, temps, top_k, top_p)]
    gen = torch.Generator().manual_seed(seed)
    try:
        got = mod.sample(logits, temps, top_k, top_p, gen)
    except RuntimeError as e:
        if "probability tensor" not in str(e) or not bool((temps == 0).any()):
            raise
        raise CheckFailed(
            f"torch.multinomial 报错：{e}\n  这一批里有温度为 0 的行：logits / 0 得到 inf 和 nan，"
            "softmax 之后整行都是 nan。先分出贪心行，只对要采样的行除以温度"
        ) from None
    B = logits.shape[0]
    check_tensor(
        got,
        f"sample(logits[{B}, {logits.shape[1]}], ...) 的返回值",
        shape=(B,),
        dtype=torch.int64,
    )
    for name, t, orig in zip(
        ("logits", "temperatures", "top_k", "top_p"),
        (logits, temps, top_k, top_p),
        inputs,
    ):
        check(torch.equal(t, orig), f"sample 改动了传进来的 {name}，它应该只读")
    V = logits.shape[1]
    check(
        bool(((got >= 0) & (got < V)).all()),
        f"sample 返回了词表以外的 token id：{got[(got < 0) | (got >= V)][:5].tolist()}（词表大小 {V}）",
    )
    return got


def tied_logits(gen, B: int, V: int) -> torch.Tensor:
    return torch.randint(-4, 5, (B, V), generator=gen).float() / 2  # 并列很多


def check_greedy(mod, gen, rng) -> None:
    # 全是贪心行：温度为 0，或者 top_k 为 1（温度不为 0）
    B, V = 12, 20
    logits = tied_logits(gen, B, V)
    temps = torch.tensor(
        [0.0 if b % 2 == 0 else rng.uniform(0.3, 2.0) for b in range(B)]
    )
    top_k = torch.tensor(
        [rng.choice([-1, 3, 1]) if b % 2 == 0 else 1 for b in range(B)]
    )
    top_p = torch.tensor([rng.choice([1.0, 0.5]) for _ in range(B)])
    got = call_sample(mod, logits, temps, top_k, top_p, seed=1)
    for b in range(B):
        want = ref_argmax(logits[b])
        why = "温度为 0" if temps[b] == 0 else "top_k 为 1"
        if int(got[b]) != want:
            tie = float(logits[b, int(got[b])]) == float(logits[b, want])
            check(
                False,
                f"第 {b} 行{why}，是贪心行：应该选 argmax = {want}，你选了 {int(got[b])}"
                + ("（它们的 logit 并列最大，并列时取 id 最小的）" if tie else "")
                + f"\n  这一行的 logits：{logits[b].tolist()}",
            )


def check_mixed(mod, gen, rng) -> None:
    """贪心行和采样行混在一批里：贪心行照样是 argmax，也不能因为除以 0 出 nan。"""
    B, V = 64, 16
    logits = tied_logits(gen, B, V)
    kinds = [rng.choice(["t0", "k1", "sample", "sample"]) for _ in range(B)]
    temps = torch.tensor([0.0 if k == "t0" else rng.uniform(0.5, 1.5) for k in kinds])
    top_k = torch.tensor([1 if k == "k1" else rng.choice([-1, 5]) for k in kinds])
    ps = [rng.choice([1.0, 0.9]) for _ in kinds]
    for b, kind in enumerate(kinds):
        if kind == "sample":
            ps[b] = away_from_boundaries(
                logits[b].double() / float(temps[b]), int(top_k[b]), ps[b]
            )
    top_p = torch.tensor(ps)
    for seed in (3, 4, 5):
        got = call_sample(mod, logits, temps, top_k, top_p, seed)
        for b, kind in enumerate(kinds):
            if kind == "sample":
                x = logits[b].double() / float(temps[b])
                allowed = ref_keep(x, int(top_k[b]), float(top_p[b]))
                if bool(allowed[int(got[b])]):
                    continue
                t, k, p = float(temps[b]), int(top_k[b]), float(top_p[b])
                hint = ""
                if (
                    float(ref_probs(logits[b], t, k, p, order="no_temp")[int(got[b])])
                    > 0
                ):
                    hint = (
                        "\n  看起来：top-p 用的是没除以温度的分布（先过滤、后除以温度，或者根本没除）；"
                        "要先除以温度，再在新的分布上过滤"
                    )
                check(
                    False,
                    f"第 {b} 行（温度 {t:.3g}，top_k {k}，top_p {p:.3g}）抽到了 {int(got[b])}，"
                    f"可它已经被 top-k / top-p 剔掉了；留下的是 {allowed.nonzero().flatten().tolist()}"
                    f"\n  这一行的 logits：{logits[b].tolist()}{hint}",
                )
                continue
            want = ref_argmax(logits[b])
            check_equal(
                int(got[b]),
                want,
                f"混合批里第 {b} 行（{'温度为 0' if kind == 't0' else 'top_k 为 1'} 的贪心行）选出的 token",
                "同一批里还有要采样的行；贪心行不管它们，照样是 argmax（并列取 id 最小的）",
            )


def check_seeds(mod, gen) -> None:
    B, V = 2000, 24
    logits = torch.randn(B, V, generator=gen)
    temps = torch.full((B,), 1.0)
    top_k = torch.full((B,), -1)
    top_p = torch.full((B,), 1.0)
    torch.manual_seed(111)
    first = call_sample(mod, logits, temps, top_k, top_p, seed=7)
    torch.manual_seed(222)  # 打乱全局随机数：用的如果是 generator，结果不该变
    torch.rand(100)
    again = call_sample(mod, logits, temps, top_k, top_p, seed=7)
    check(
        torch.equal(first, again),
        "同一个种子的 generator、同样的输入，两次 sample 的结果不一样：随机数要从传进来的 generator 里取"
        "（torch.multinomial(probs, 1, generator=generator)），不要用全局随机数",
    )
    other = call_sample(mod, logits, temps, top_k, top_p, seed=8)
    check(
        not torch.equal(first, other),
        f"种子 7 和种子 8 抽出来的 {B} 个 token 完全一样：结果好像根本不随机",
    )
    g = torch.Generator().manual_seed(7)
    one = mod.sample(logits, temps, top_k, top_p, g)
    two = mod.sample(logits, temps, top_k, top_p, g)
    check(
        not torch.equal(one, two),
        "用同一个 generator 连着抽两次，结果完全一样：sample 里是不是重新设了种子、或者复制了 generator？"
        "应该直接用传进来的 generator，让它往前走",
    )


def check_statistics(mod, gen, rng) -> None:
    """几种参数组合各复制 DRAWS 行放进一批，一次抽完，逐组做卡方检验。"""
    configs = [  # (温度, top_k, top_p)
        (1.0, -1, 1.0),
        (0.5, -1, 1.0),
        (2.0, 6, 1.0),
        (0.8, -1, 0.75),
        (1.3, 10, 0.9),
        (0.7, 4, 0.6),
    ]
    V = 24
    base = torch.randn(len(configs), V, generator=gen, dtype=torch.float64) * 1.5
    rows, temps, ks, ps = [], [], [], []
    for i, (t, k, p) in enumerate(configs):
        p = away_from_boundaries(base[i].float().double() / t, k, p)
        configs[i] = (t, k, p)
        rows.append(base[i].float().expand(DRAWS, V))
        temps += [t] * DRAWS
        ks += [k] * DRAWS
        ps += [p] * DRAWS
    logits = torch.cat(rows).contiguous()
    got = call_sample(
        mod,
        logits,
        torch.tensor(temps),
        torch.tensor(ks),
        torch.tensor(ps),
        seed=rng.randrange(2**31),
    )
    for i, (t, k, p) in enumerate(configs):
        row = logits[i * DRAWS]
        samples = got[i * DRAWS : (i + 1) * DRAWS]
        counts = torch.bincount(samples, minlength=V).tolist()
        want = ref_probs(row, t, k, p)
        context = f"参数组合：温度 {t}，top_k {k}，top_p {p:.3g}（这一组 {DRAWS} 行，logits 都一样）"
        allowed = (want > 0).tolist()
        outside = [tok for tok in range(V) if counts[tok] and not allowed[tok]]
        if outside:
            hint = mistake_hint([
                why
                for order, why in (
                    ("filter_first", "像是先过滤、后除以温度：top-p 要在除以温度之后的分布上算"),
                    ("no_temp", "像是没有除以温度"),
                )
                if all(ref_probs(row, t, k, p, order=order)[tok] > 0 for tok in outside)
            ])
            check(
                False,
                f"{context}：抽到了已经被 top-k / top-p 剔掉的 token {outside[:8]}"
                f"（各抽到 {[counts[tok] for tok in outside[:8]]} 次）；应该只从 "
                f"{[tok for tok in range(V) if allowed[tok]]} 里抽{hint}",
            )
        stat, df = chi_square(counts, want.tolist())
        if stat > chi_bound(df):
            expected = [round(q * DRAWS, 1) for q in want.tolist()]
            hits = []
            for order, why in (
                ("no_temp", "像是没有除以温度"),
                ("filter_first", "像是先过滤、后除以温度"),
            ):
                alt_stat, alt_df = chi_square(
                    counts, ref_probs(row, t, k, p, order=order).tolist()
                )
                if alt_stat <= chi_bound(alt_df):
                    hits.append(why)
            hint = mistake_hint(hits)
            if all(c == 0 for j, c in enumerate(counts) if j != ref_argmax(row)):
                hint = "\n  看起来：这一组全选了 argmax——它不是贪心行（温度不为 0、top_k 不为 1），要按概率抽"
            check(
                False,
                f"{context}：抽样的频率和应该的概率对不上（卡方 {stat:.1f}，自由度 {df}，界限 {chi_bound(df):.1f}）\n"
                f"  每个 token 的期望次数：{expected}\n  你抽到的次数：    {counts}{hint}",
            )


def check_bad_arguments(mod, gen, rng: random.Random) -> None:
    """坏参数：批大小、词表大小随机；坏的温度在随机的一行上，就在 0 的下面一点、远一些，或者 nan；
    temperatures 的形状有长度不对的，也有多了一维、长度却“对”的；logits 有一维的、三维的。"""

    def spoiled(r, spoil):  # temps 的一份拷贝，随机一行换成坏值
        return torch.tensor(with_bad_item(r, temps.tolist(), spoil), dtype=temps.dtype)

    def other_length(r):
        n = B + r.choice([-B, -1, 1, r.randint(2, 50)])
        return torch.cat([temps, temps])[:n] if n <= 2 * B else temps[:1].repeat(n)

    def call(logits, temperatures, top_k, top_p, generator):  # 按位置传参
        return mod.sample(logits, temperatures, top_k, top_p, generator)

    for _ in range(2):
        B, V = rng.randint(2, 8), rng.randint(2, 40)
        logits = tied_logits(gen, B, V)
        temps = torch.tensor([rng.choice([0.0, rng.uniform(0.3, 2.0)]) for _ in range(B)])
        top_k = torch.tensor([rng.choice([-1, 1, rng.randint(1, V)]) for _ in range(B)])
        top_p = torch.tensor([rng.choice([1.0, rng.uniform(0.3, 1.0)]) for _ in range(B)])
        good = dict(logits=logits, temperatures=temps, top_k=top_k, top_p=top_p,
                    generator=torch.Generator().manual_seed(rng.randrange(2**31)))
        kinds = [
            ("temperatures", lambda r: spoiled(r, lambda t, r: -r.uniform(1e-6, 1e-3))),  # 刚好小于 0
            ("temperatures", lambda r: spoiled(r, lambda t, r: -r.uniform(0.5, 100.0))),  # 远小于 0
            ("temperatures", lambda r: spoiled(r, lambda t, r: float("nan"))),
            ("temperatures", other_length),  # 长度和 logits 的行数对不上
            # [1, B] 和 [B, 1] 各试一次：[B, 1] 的 len() 恰好是 B，只比长度的检查看不出来
            ("temperatures", lambda r: temps.unsqueeze(0)), ("temperatures", lambda r: temps.unsqueeze(1)),
            ("logits", lambda r: r.choice([logits[r.randrange(B)], logits.reshape(-1)])),  # 一维的
            ("logits", lambda r: r.choice([logits.unsqueeze(0), logits.unsqueeze(-1)])),  # 三维的
        ]
        for key, spoil in kinds:
            probe_bad_arguments(call, good, {key: spoil}, rng, name="sample", tries=1)


def run(mod: object) -> None:
    require(mod, "sample")
    torch.set_num_threads(1)  # 张量都很小，多线程帮不上忙；几个评测同时跑时反而慢很多
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)

    check_greedy(mod, gen, rng)
    check_mixed(mod, gen, rng)
    check_seeds(mod, gen)
    check_statistics(mod, gen, rng)
    check_bad_arguments(mod, gen, random.Random(SEED + 1))


if __name__ == "__main__":
    main(run)
