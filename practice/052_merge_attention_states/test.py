"""练习 052 的评测：随机的 key 切成随机的几块（有空块）逐块算、再合并，和整块的 SDPA 比；
merge_states 另外用合成的状态测（lse 从 -1e4 到 1e4、有 -inf），和 float64 的参考比。

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
from judgekit import check, check_raises, check_tensor, check_type, main, mistake_hint, require, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
NEG_INF = float("-inf")


# ---------------------------------------------------------------------------
# 参考实现（float64）
# ---------------------------------------------------------------------------


def ref_state(q, k, v, scale):
    T, H, d = q.shape
    if k.shape[0] == 0:
        return torch.zeros(T, H, d, dtype=torch.float64), torch.full((T, H), NEG_INF, dtype=torch.float64)
    s = torch.einsum("thd,nhd->thn", q.double(), k.double()) * scale
    return torch.einsum("thn,nhd->thd", torch.softmax(s, -1), v.double()), torch.logsumexp(s, -1)


def ref_merge(outputs, lses):
    lse = torch.stack([l.double() for l in lses])
    total = torch.logsumexp(lse, dim=0)  # 全是 -inf 时得 -inf
    safe = torch.where(torch.isinf(total), 0.0, total)
    w = torch.where(torch.isinf(lse), 0.0, torch.exp(lse - safe))
    o = (w[..., None] * torch.stack([o.double() for o in outputs])).sum(0)
    return o, total


def full_attention(q, k, v, scale):
    """整块：SDPA（float64），每个 query 看全部 key。"""
    out = F.scaled_dot_product_attention(q.double().transpose(0, 1), k.double().transpose(0, 1),
                                         v.double().transpose(0, 1), scale=scale)
    return out.transpose(0, 1)


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def close(got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float = 1e-5) -> bool:
    g, w = got.double(), want.double()
    same_inf = torch.equal(torch.isneginf(g), torch.isneginf(w))
    finite = ~torch.isneginf(w)
    return same_inf and bool(torch.isfinite(g[finite]).all()) and bool(
        ((g[finite] - w[finite]).abs() <= atol + rtol * w[finite].abs()).all())


def check_state(mod, q, k, v, scale, what: str):
    inputs = [t.clone() for t in (q, k, v)]
    got = mod.attention_state(q, k, v, scale)
    check_type(got, tuple, f"{what} 的返回值")
    check(len(got) == 2, f"{what} 应该返回 (o, lse) 两个张量")
    o, lse = got
    T, H, d = q.shape
    check_tensor(o, f"{what} 的 o", shape=(T, H, d), dtype=q.dtype)
    check_tensor(lse, f"{what} 的 lse", shape=(T, H), dtype=torch.float32)
    for t, orig, name in zip((q, k, v), inputs, "qkv"):
        check(torch.equal(t, orig), f"{what} 改动了传进来的 {name}")
    want_o, want_lse = ref_state(q, k, v, scale)
    hits = []
    if k.shape[0] and close(lse, torch.logsumexp(torch.einsum("thd,nhd->thn", q.double(), k.double()), -1), 1e-3, 1e-5) \
            and scale != 1:
        hits.append("lse 没乘 scale：要的是缩放之后的分数 s = (q·k) × scale 的 log-sum-exp")
    if k.shape[0] and close(lse, torch.einsum("thd,nhd->thn", q.double(), k.double()).mul(scale).amax(-1), 1e-3, 1e-5) \
            and k.shape[0] > 1:
        hits.append("lse 只取了最大的分数：要的是 log Σ exp(s)")
    check(close(lse, want_lse, 2e-4, 1e-5),
          f"{what} 的 lse 不对（n = {k.shape[0]}）：\n  应该是 {want_lse.flatten()[:6].tolist()}\n"
          f"  你的是 {lse.flatten()[:6].tolist()}" + mistake_hint(hits))
    tol = 2e-5 if q.dtype in (torch.float32, torch.float64) else 2e-2
    check(close(o, want_o, tol, 1e-3), f"{what} 的 o 不对（n = {k.shape[0]}）："
          f"最大误差 {(o.double() - want_o).abs().max().item() if o.numel() else 0:.3g}")
    return o, lse


def random_split(rng: random.Random, n: int) -> list[int]:
    """把 n 个 key 切成几块的边界，可能有空块。"""
    cuts = sorted(rng.randint(0, n) for _ in range(rng.randint(0, 4)))
    if rng.random() < 0.3:
        cuts.append(rng.choice([0, n]))  # 开头或末尾多一个空块
    return [0] + sorted(cuts) + [n]


def check_split(mod, rng: random.Random, gen: torch.Generator) -> None:
    T, H, d = rng.randint(1, 4), rng.randint(1, 4), rng.choice([8, 16, 64])
    n = rng.randint(1, 80)
    dtype = rng.choice([torch.float32, torch.float32, torch.float64, torch.bfloat16, torch.float16])
    big = rng.random() < 0.4  # 分数很大：softmax 几乎只剩一个 key，lse 在几百上千
    q = (torch.randn(T, H, d, generator=gen, dtype=torch.float64) * (40 if big else 1)).to(dtype)
    k = torch.randn(n, H, d, generator=gen, dtype=torch.float64).to(dtype)
    v = torch.randn(n, H, d, generator=gen, dtype=torch.float64).to(dtype)
    scale = rng.choice([d ** -0.5, rng.uniform(0.02, 2.0)])  # 不一定是 1/√d：scale 是参数
    bounds = random_split(rng, n)
    states = [check_state(mod, q, k[a:b], v[a:b], scale, f"attention_state(q [{T}, {H}, {d}], key {a}:{b})")
              for a, b in zip(bounds, bounds[1:])]
    order = list(range(len(states)))
    rng.shuffle(order)  # 合并和顺序无关
    outs, lses = [states[i][0] for i in order], [states[i][1] for i in order]
    o, lse = merge(mod, outs, lses, f"merge_states（{len(states)} 块，边界 {bounds}）", dtype)
    want = full_attention(q, k, v, scale)
    err = (o.double() - want).abs().max().item()
    tol = (2e-5 if dtype in (torch.float32, torch.float64) else 3e-2) * (40 if big else 1)
    check(err < tol, f"逐块算、再合并的结果和整块的注意力不一样（边界 {bounds}，分数"
          f"{'很大' if big else '正常'}）：最大误差 {err:.3g}")


def merge(mod, outs, lses, what: str, dtype):
    inputs = [t.clone() for t in outs + lses]
    got = mod.merge_states(outs, lses)
    check_type(got, tuple, f"{what} 的返回值")
    check(len(got) == 2, f"{what} 应该返回 (o, lse) 两个张量")
    o, lse = got
    check_tensor(o, f"{what} 的 o", shape=tuple(outs[0].shape), dtype=dtype)
    check_tensor(lse, f"{what} 的 lse", shape=tuple(outs[0].shape[:2]), dtype=torch.float32)
    check(all(torch.equal(a, b) for a, b in zip(outs + lses, inputs)), f"{what} 改动了传进来的张量")
    return o, lse


def check_synthetic(mod, rng: random.Random, gen: torch.Generator) -> None:
    """合成的状态：lse 的量级从 -1e4 到 1e4，有的块、有的位置是 -inf。"""
    K, T, H, d = rng.randint(1, 6), rng.randint(1, 5), rng.randint(1, 4), rng.choice([4, 16])
    scale = rng.choice([1.0, 50.0, 1e3, 1e4, 1e5])  # 1e5：超出 float16 的范围（65504）
    outs = [torch.randn(T, H, d, generator=gen) for _ in range(K)]
    lses = [(torch.randn(T, H, generator=gen, dtype=torch.float64) * scale).float() for _ in range(K)]
    for lse in lses:
        lse[torch.rand(T, H, generator=gen) < 0.25] = NEG_INF
    if rng.random() < 0.5:  # 某个 (token, 头) 所有块都是空的
        t, h = rng.randrange(T), rng.randrange(H)
        for lse in lses:
            lse[t, h] = NEG_INF
    if rng.random() < 0.2:
        lses[rng.randrange(K)][:] = NEG_INF  # 整块空
    for lse, o in zip(lses, outs):
        o[torch.isneginf(lse)] = 0.0  # 空块的 o 是零（attention_state 交出来的就是这样）
    what = f"merge_states（{K} 块合成的状态，lse 的量级 {scale:g}）"
    o, lse = merge(mod, outs, lses, what, torch.float32)
    want_o, want_lse = ref_merge(outs, lses)
    hits = []
    if bool(torch.isnan(o).any()) or bool(torch.isnan(lse).any()):
        hits.append("出现了 nan：-inf - (-inf) 或 0/0；全是 -inf 的位置要单独处理")
    if bool(torch.isinf(o).any()) or bool(torch.isposinf(lse).any()):
        hits.append("出现了 inf：exp(lse) 在 float32 里超过 88 就溢出，先减去最大的 lse")
    check(close(lse, want_lse, 1e-3 + 2e-6 * scale, 1e-6), f"{what} 的 lse 不对：\n  应该是 "
          f"{want_lse.flatten()[:6].tolist()}\n  你的是 {lse.flatten()[:6].tolist()}" + mistake_hint(hits))
    check(close(o, want_o, 1e-5, 1e-4), f"{what} 的 o 不对：最大误差 "
          f"{(o.double() - want_o).abs().nan_to_num(float('inf')).max().item():.3g}" + mistake_hint(hits))


def check_bad_arguments(mod, gen: torch.Generator) -> None:
    o, lse = torch.randn(2, 3, 4, generator=gen), torch.randn(2, 3, generator=gen)
    for outs, lses, why in (([], [], "列表为空"), ([o, o], [lse], "两个列表长度不同"),
                            ([o, torch.randn(2, 3, 5)], [lse, lse], "o 的 d 不一样"),
                            ([o, torch.randn(2, 4, 4)], [lse, lse], "第二块 o 的头数不一样"),
                            ([o, torch.randn(3, 3, 4)], [lse, lse], "第二块 o 的 token 数不一样"),
                            ([o, o], [lse, torch.randn(3, 2)], "lse 的形状和 o 对不上"),
                            ([o.reshape(2, 3, 2, 2)], [lse], "o 不是三维的")):
        check_raises(ValueError, mod.merge_states, outs, lses, what=f"merge_states（{why}）")
    q = torch.randn(2, 3, 4, generator=gen)
    for k, v, qq, why in ((torch.randn(5, 2, 4), torch.randn(5, 2, 4), q, "k 的头数和 q 不一样"),
                          (torch.randn(5, 3, 8), torch.randn(5, 3, 8), q, "k 的 head_dim 和 q 不一样"),
                          (torch.randn(5, 3, 4), torch.randn(6, 3, 4), q, "k、v 的 key 数不一样"),
                          (torch.randn(5, 3, 4), torch.randn(5, 3, 4), q.reshape(2, 12), "q 不是三维的")):
        check_raises(ValueError, mod.attention_state, qq, k, v, 0.5, what=f"attention_state（{why}）")


def run(mod: object) -> None:
    require(mod, "attention_state")
    require(mod, "merge_states")
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)
    for _ in range(25):
        check_split(mod, rng, gen)
    for _ in range(25):
        check_synthetic(mod, rng, gen)
    check_bad_arguments(mod, gen)


if __name__ == "__main__":
    main(run)
