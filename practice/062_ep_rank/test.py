"""练习 062 的评测：专家并行里一个 rank 只拿到本地专家的权重。

检查顺序：local_ids 的类型、形状和逐个编号（题面的例子、随机的 E / ep_size / rank，每个 rank 都查）→ 坏参数
（随机挑一个参数、随机挑坏值）→ rank_output：题面的例子，再是随机的形状和偏斜的路由（有的 rank 一个 token
都分不到，有的行在这个 rank 上全是 -1）。每个 rank 只拿到自己那几个专家的权重（切出来的拷贝），输出先查形状、
dtype、输入有没有被改，再查“一个本地专家都没选的行正好是 0”，再和参考实现比较；最后各 rank 的输出加起来
（all_reduce）要等于单卡上全部专家的 MoE 输出（ep_size = 1 的情况也在里面）。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)  # 张量都很小：单线程更快，也不和别的进程抢 CPU 核

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (CheckFailed, bad_int, check, check_close, check_tensor, main, mistake_hint,
                      probe_bad_arguments, require, seed, short)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


# ---------------------------------------------------------------------------
# 参考实现：逐个 (token, 格子) 用 Python 的整数和 float64 算，不按专家分组
# ---------------------------------------------------------------------------


def ref_local_ids(ids: torch.Tensor, rank: int, ep: int, num_experts: int) -> torch.Tensor:
    per = num_experts // ep
    lo, hi = rank * per, (rank + 1) * per
    rows = [[e - lo if lo <= e < hi else -1 for e in row] for row in ids.tolist()]
    return torch.tensor(rows, dtype=torch.int32).reshape(ids.shape)


def expert(w1e: torch.Tensor, w2e: torch.Tensor, xm: torch.Tensor, *, silu_on: str = "gate") -> torch.Tensor:
    """一个专家的 MLP，float64：down(silu(gate(x)) · up(x))。silu_on="up" 是把 silu 用错了地方的版本。"""
    inter = w2e.shape[1]
    h = w1e.double() @ xm.double()
    gate, up = h[:inter], h[inter:]
    if silu_on == "up":
        gate, up = up, gate
    act = gate / (1 + torch.exp(-gate)) * up  # silu(g) = g · sigmoid(g)
    return w2e.double() @ act


def ref_output(x, w1, w2, weights, ids, *, skip: bool = True, silu_on: str = "gate",
               weight_rule: str = "slot") -> torch.Tensor:
    """第 m 行 = Σ_j 权重 · 专家 ids[m][j](x_m)，float64。默认就是题目要的；别的参数是几种常见错误：
    skip=False：-1 当成 Python 的负下标（w1[-1] 是最后一个专家）；weight_rule="expert"：权重按专家编号取列；
    "one"：不乘权重；"renorm"：只在本 rank 的格子里把权重再归一化。"""
    m_rows, hidden = x.shape
    n_local = w1.shape[0]
    out = torch.zeros(m_rows, hidden, dtype=torch.float64)
    id_rows, w_rows = ids.tolist(), weights.double().tolist()
    for m in range(m_rows):
        local_sum = sum(w for e, w in zip(id_rows[m], w_rows[m]) if e >= 0)
        for j, e in enumerate(id_rows[m]):
            if e < 0:
                if skip:
                    continue
                e += n_local
            if weight_rule == "expert":
                w = w_rows[m][e]
            elif weight_rule == "one":
                w = 1.0
            elif weight_rule == "renorm":
                w = w_rows[m][j] / local_sum
            else:
                w = w_rows[m][j]
            out[m] += w * expert(w1[e], w2[e], x[m], silu_on=silu_on)
    return out


def magnitude(x, w1, w2, weights, ids) -> float:
    """容差的尺度：每一项都取绝对值再加起来的最大值（输出里的抵消不会让容差跟着变小）。"""
    inter = w2.shape[2]
    top = 0.0
    for m, (row, wrow) in enumerate(zip(ids.tolist(), weights.double().abs().tolist())):
        acc = torch.zeros(x.shape[1], dtype=torch.float64)
        for e, w in zip(row, wrow):
            if e < 0:
                continue
            h = w1[e].double() @ x[m].double()
            hin = w1[e].double().abs() @ x[m].double().abs()
            g, u = h[:inter], h[inter:]
            act = (g / (1 + torch.exp(-g))).abs() * u.abs() + hin[:inter] * hin[inter:]
            acc += w * (w2[e].double().abs() @ act)
        top = max(top, float(acc.max()))
    return top


# ---------------------------------------------------------------------------
# local_ids
# ---------------------------------------------------------------------------


def local_id_hints(got: torch.Tensor, ids: torch.Tensor, rank: int, ep: int, num_experts: int) -> list[str]:
    per = num_experts // ep
    first = rank * per
    ids64 = ids.long()
    mine = (ids64 >= first) & (ids64 < first + per)
    g = got.long()
    hits = []
    if torch.equal(g, torch.where(mine, ids64, -1)) and first > 0:
        hits.append(f"本 rank 的专家保留了全局编号：w1_local 只有 E/ep_size = {per} 个专家（下标 0..{per - 1}），"
                    f"要减去本 rank 第一个专家的编号 rank·E/ep_size = {first}")
    if torch.equal(g, torch.where(mine, ids64 - first, 0)):
        hits.append("不在本 rank 上的格子标成了 0：0 是本地第 0 个专家，rank_output 会把它算进去；要标 -1")
    if torch.equal(g, ids64 % per) and per < num_experts:
        hits.append(f"取了模（% {per}）：每个全局专家都被映射到了某个本地专家上，别的 rank 的专家也被算到了这里；"
                    "不在本 rank 上的要标 -1")
    if torch.equal(g, ids64 - first) and per < num_experts:
        hits.append("只减了第一个专家的编号，没有把落在 [0, E/ep_size) 之外的标成 -1")
    if per != ep:
        wrong = rank * ep
        if torch.equal(g, torch.where((ids64 >= wrong) & (ids64 < wrong + per), ids64 - wrong, -1)):
            hits.append(f"本 rank 第一个专家的编号算成了 rank·ep_size = {wrong}：应该是 rank·(E/ep_size) = {first}"
                        f"（每个 rank 放 {per} 个专家）")
    return hits


def check_local_ids_once(mod, ids: torch.Tensor, rank: int, ep: int, num_experts: int) -> torch.Tensor:
    call = f"local_ids(topk_ids{tuple(ids.shape)}, rank={rank}, ep_size={ep}, num_experts={num_experts})"
    before = ids.clone()
    got = mod.local_ids(ids, rank, ep, num_experts)
    check_tensor(got, f"{call} 的返回值", shape=tuple(ids.shape), dtype=torch.int32)
    check(torch.equal(ids, before), f"{call} 改动了传进来的 topk_ids：引擎里路由的结果还要交给别的地方用，不许改")
    want = ref_local_ids(ids, rank, ep, num_experts)
    if not torch.equal(got, want):
        m, j = (int(v) for v in (got != want).nonzero()[0])
        per = num_experts // ep
        e = int(ids[m, j])
        if want[m, j] >= 0:
            why = f"专家 {e} 在这个 rank 上（rank {rank} 放专家 [{rank * per}, {(rank + 1) * per})），本地编号是 {e} - {rank * per}"
        else:
            why = f"专家 {e} 不在这个 rank 上（rank {rank} 放专家 [{rank * per}, {(rank + 1) * per})），要标 -1"
        raise CheckFailed(
            f"{call} 的第 {m} 行第 {j} 格不对：{why}，应该是 {int(want[m, j])}，你的是 {int(got[m, j])}。\n"
            f"  topk_ids：{short(ids.tolist(), 200)}\n  应该是：{short(want.tolist(), 200)}\n"
            f"  你的是：{short(got.tolist(), 200)}" + mistake_hint(local_id_hints(got, ids, rank, ep, num_experts)))
    return want


def random_routing(rng: random.Random, gen: torch.Generator, m_rows: int, num_experts: int, k: int,
                   ep: int) -> torch.Tensor:
    """[M, k] int32，每行 k 个不同的专家。路由是偏斜的：常常只有几个 rank 上的专家被选到，别的 rank 一个 token
    都分不到（也有的冷门专家偶尔被选中）。"""
    per = num_experts // ep
    hot_ranks = rng.sample(range(ep), rng.randint(1, ep))
    while len(hot_ranks) * per < k:
        hot_ranks.append(next(r for r in range(ep) if r not in hot_ranks))
    probs = torch.zeros(num_experts, dtype=torch.float64)
    cold = rng.choice([0.0, 0.0, 0.02])
    for r in range(ep):
        probs[r * per: (r + 1) * per] = cold
    for r in hot_ranks:
        probs[r * per: (r + 1) * per] = torch.rand(per, generator=gen, dtype=torch.float64) + 0.05
    if rng.random() < 0.3:  # 有时干脆是均匀的
        probs = torch.ones(num_experts, dtype=torch.float64)
    return torch.multinomial(probs.expand(m_rows, num_experts), k, replacement=False, generator=gen).to(torch.int32)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def check_local_ids(mod, rng: random.Random, gen: torch.Generator) -> None:
    example = torch.tensor([[0, 3], [2, 3], [1, 0]], dtype=torch.int32)  # 题面里的例子
    for rank in range(2):
        check_local_ids_once(mod, example, rank, 2, 4)
    cases = [(16, 1), (16, 16), (8, 2)]
    for _ in range(14):
        num_experts = rng.choice([2, 4, 8, 16, 64, 128])
        cases.append((num_experts, rng.choice([d for d in divisors(num_experts) if d <= 16])))
    for num_experts, ep in cases:
        k = rng.randint(1, min(num_experts, 8))
        ids = random_routing(rng, gen, rng.randint(1, 30), num_experts, k, ep)
        ranks = list(range(ep)) if ep <= 8 else sorted(rng.sample(range(ep), 6) + [0, ep - 1])
        for rank in ranks:
            check_local_ids_once(mod, ids, rank, ep, num_experts)


def check_bad_arguments(mod, rng: random.Random, gen: torch.Generator) -> None:
    ep = rng.choice([2, 3, 4, 6, 8])
    per = rng.randint(1, 4)
    num_experts = ep * per
    good = dict(topk_ids=random_routing(rng, gen, rng.randint(1, 6), num_experts, min(2, num_experts), ep),
                rank=rng.randrange(ep), ep_size=ep, num_experts=num_experts)
    bad = {
        "ep_size": lambda r: r.choice([0, bad_int(r, 1)]),
        "rank": lambda r: r.choice([-1, bad_int(r, -1), ep, ep + r.randint(1, 20)]),
        "num_experts": lambda r: ep * r.randint(1, 8) + r.randint(1, ep - 1),
    }
    for key in bad:  # 每种坏参数至少试一次，再随机多试几次
        probe_bad_arguments(mod.local_ids, good, {key: bad[key]}, rng, name="local_ids", tries=1)
    probe_bad_arguments(mod.local_ids, good, bad, rng, name="local_ids", tries=6)


# ---------------------------------------------------------------------------
# rank_output
# ---------------------------------------------------------------------------


class Case:
    def __init__(self, x, w1, w2, weights, ids, ep: int, label: str) -> None:
        self.x, self.w1, self.w2, self.weights, self.ids, self.ep = x, w1, w2, weights, ids, ep
        self.num_experts, self.per = w1.shape[0], w1.shape[0] // ep
        self.label = label
        self.scale = magnitude(x, w1, w2, weights, ids)
        self.atol = 1e-5 * self.scale + 1e-7

    def shard(self, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
        """rank 的本地专家：切出来的拷贝（传过去的只有这几个专家，拿不到别的）。"""
        lo, hi = rank * self.per, (rank + 1) * self.per
        return self.w1[lo:hi].clone(), self.w2[lo:hi].clone()


def example_case() -> Case:
    """题面里的例子：E = 4，ep_size = 2，k = 2，H = 2，I = 1。"""
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    w1 = torch.tensor([[[1.0, 0.0], [1.0, 1.0]], [[1.0, 1.0], [0.0, 1.0]],
                       [[0.0, 1.0], [1.0, 1.0]], [[1.0, -1.0], [1.0, 0.0]]])
    w2 = torch.tensor([[[1.0], [0.0]], [[0.0], [1.0]], [[1.0], [1.0]], [[1.0], [-1.0]]])
    weights = torch.tensor([[0.75, 0.25], [0.5, 0.5], [0.6, 0.4]])
    ids = torch.tensor([[0, 3], [2, 3], [1, 0]], dtype=torch.int32)
    return Case(x, w1, w2, weights, ids, 2, "题面里的例子：E = 4，ep_size = 2，k = 2")


def random_case(rng: random.Random, gen: torch.Generator, num_experts: int, ep: int) -> Case:
    m_rows, hidden, inter = rng.randint(1, 40), rng.randint(8, 64), rng.randint(4, 48)
    k = rng.randint(1, min(num_experts, 4))
    x = torch.randn(m_rows, hidden, generator=gen) * rng.choice([0.5, 1.0, 2.0])
    w1 = torch.randn(num_experts, 2 * inter, hidden, generator=gen) / math.sqrt(hidden)
    w2 = torch.randn(num_experts, hidden, inter, generator=gen) / math.sqrt(inter)
    weights = torch.rand(m_rows, k, generator=gen) * 0.9 + 0.1  # 每格的权重都不一样：乘错了格子看得出来
    if rng.random() < 0.5:
        weights = weights / weights.sum(dim=1, keepdim=True)
    ids = random_routing(rng, gen, m_rows, num_experts, k, ep)
    label = f"M = {m_rows}，H = {hidden}，I = {inter}，E = {num_experts}，k = {k}，ep_size = {ep}"
    return Case(x, w1, w2, weights, ids, ep, label)


def output_hints(case: Case, rank: int, got: torch.Tensor, lids: torch.Tensor) -> list[str]:
    w1, w2 = case.shard(rank)
    args = (case.x, w1, w2, case.weights, lids)
    g = got.double()

    def same(other: torch.Tensor) -> bool:
        return bool(torch.allclose(g, other, rtol=1e-5, atol=case.atol))

    want = ref_output(*args)
    hits = []
    if bool((lids < 0).any()) and same(ref_output(*args, skip=False)):
        hits.append(f"-1 的格子没有跳过：w1_local[-1] 是 Python 的负下标，取到的是本地最后一个专家（第 {case.per - 1} 个），"
                    "不报错，结果却悄悄多算了一份。-1 只是“不在本 rank 上”的记号，不能拿去当下标")
    if same(ref_output(*args, silu_on="up")):
        hits.append("silu 用在了 up 上：w1 每个专家的前 I 行是 gate、后 I 行是 up，激活是 silu(gate) · up")
    if int(lids.max()) < lids.shape[1] and same(ref_output(*args, weight_rule="expert")):
        hits.append("权重按专家编号取了列（topk_weights[m, e]）：topk_weights 的第 j 列是第 j 格的权重，"
                    "要乘的是选中这个专家的那一格的权重 topk_weights[m, j]")
    if same(ref_output(*args, weight_rule="one")):
        hits.append("没有乘 topk_weights：每个专家的输出要乘上它那一格的路由权重再加起来")
    if same(ref_output(*args, weight_rule="renorm")) and not same(want):
        hits.append("在本 rank 的格子里把权重重新归一化了：权重在路由时就定好了（全部 k 格一起归一化），"
                    "每个 rank 只乘不改；重新归一化以后各 rank 加起来就不是原来的加权和了")
    if case.ep > 1 and same(want / case.ep):
        hits.append(f"结果除以了 ep_size = {case.ep}：all_reduce 是求和不是求平均，"
                    "每个 rank 算的是不同专家的贡献，各算各的、加起来正好是全部")
    return hits


def call_rank_output(mod, args: tuple, what: str, case: Case) -> torch.Tensor:
    try:
        return mod.rank_output(*args)
    except (IndexError, RuntimeError) as e:
        text = str(e)
        if "index" not in text.lower() or not any(w in text.lower() for w in ("out of", "range", "bounds")):
            raise
        raise CheckFailed(
            f"{what} 下标越界了（{getattr(e, 'remote_type', type(e).__name__)}: {text.splitlines()[0]}）。\n"
            f"  local_topk_ids 是本地编号（0..{case.per - 1}，-1 表示跳过）：w1_local、w2_local 只有 {case.per} 个专家；"
            f"topk_weights 的第二维是 {case.ids.shape[1]} 个格子（第 j 列是第 j 格的权重，不是第 j 个专家的）。"
            "拿全局编号去取本地权重、拿专家编号去取 topk_weights 的列，都会越界") from None


def check_rank_output_once(mod, case: Case, rank: int, lids: torch.Tensor) -> torch.Tensor:
    w1, w2 = case.shard(rank)
    x, weights = case.x.clone(), case.weights.clone()
    lids = lids.clone()
    before = [t.clone() for t in (x, w1, w2, weights, lids)]
    m_rows, hidden = x.shape
    what = (f"rank_output（{case.label}，rank {rank}，本地专家 [{rank * case.per}, {(rank + 1) * case.per})，"
            f"w1_local{tuple(w1.shape)}）")
    context = f"\n  local_topk_ids：{short(lids.tolist(), 200)}"
    got = call_rank_output(mod, (x, w1, w2, weights, lids), what, case)
    check_tensor(got, f"{what} 的返回值", shape=(m_rows, hidden), dtype=torch.float32)
    names = ("x", "w1_local", "w2_local", "topk_weights", "local_topk_ids")
    for name, now, then in zip(names, (x, w1, w2, weights, lids), before):
        check(torch.equal(now, then), f"{what} 改动了传进来的 {name}：同一份输入还要交给别的层、别的 rank 用，不许改"
              + (f"（-1 的格子被改掉了？）{context}" if name == "local_topk_ids" else ""))
    want = ref_output(x, w1, w2, weights, lids)
    empty = (lids < 0).all(dim=1)
    if bool(empty.any()):
        bad = empty & (got != 0).any(dim=1)
        if bool(bad.any()):
            m = int(bad.nonzero()[0])
            raise CheckFailed(
                f"{what} 的第 {m} 行应该正好是 0：这一行的 {lids.shape[1]} 格都是 -1（选中的专家都不在这个 rank 上），"
                f"这个 rank 对它没有贡献。你的是 {short([round(v, 6) for v in got[m].tolist()], 160)}"
                + context + mistake_hint(output_hints(case, rank, got, lids)))
    try:
        check_close(got, want.float(), what, atol=case.atol, rtol=1e-5)
    except CheckFailed as e:
        raise CheckFailed(str(e) + context + mistake_hint(output_hints(case, rank, got, lids))) from None
    return got


def check_case(mod, case: Case) -> None:
    lids = [check_local_ids_once(mod, case.ids, r, case.ep, case.num_experts) for r in range(case.ep)]
    total = torch.zeros(case.x.shape, dtype=torch.float64)
    for rank in range(case.ep):
        total += check_rank_output_once(mod, case, rank, lids[rank]).double()
    full = ref_output(case.x, case.w1, case.w2, case.weights, case.ids)
    check_close(total, full, f"各 rank 的 rank_output 加起来（all_reduce；{case.label}）与单卡上全部专家的 MoE 输出",
                atol=case.atol * case.ep, rtol=1e-5)


def check_rank_outputs(mod, rng: random.Random, gen: torch.Generator) -> None:
    check_case(mod, example_case())
    plans = [(4, 1), (16, 16), (8, 2)]
    for _ in range(13):
        num_experts = rng.choice([2, 4, 8, 16])
        plans.append((num_experts, rng.choice(divisors(num_experts))))
    rng.shuffle(plans)
    for num_experts, ep in plans:
        check_case(mod, random_case(rng, gen, num_experts, ep))


def run(mod: object) -> None:
    for name in ("local_ids", "rank_output"):
        require(mod, name)
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)
    check_local_ids(mod, rng, gen)
    check_bad_arguments(mod, random.Random(SEED + 1), torch.Generator().manual_seed(SEED + 1))
    check_rank_outputs(mod, rng, gen)


if __name__ == "__main__":
    main(run)
