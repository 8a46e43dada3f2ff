"""练习 055 的评测：随机的 KV 池（没写过的槽位是 nan）、随机的批和上一次留下的旧缓冲区；逐项检查两块
缓冲区，再用它们做一次带掩码的 SDPA，和逐个请求只看真实 key 的参考结果比较。

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
from judgekit import check, check_close, check_raises, main, mistake_hint, require, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
HKV, HQ, D = 2, 4, 8


def make_case(rng: random.Random, gen: torch.Generator):
    num_slots = rng.randint(20, 200)
    written = sorted(rng.sample(range(1, num_slots), rng.randint(10, num_slots // 2)))  # 槽位 0 从没写过
    unwritten = [s for s in range(num_slots) if s not in set(written)]
    k_pool = torch.full((num_slots, HKV, D), float("nan"))
    v_pool = torch.full((num_slots, HKV, D), float("nan"))
    k_pool[written] = torch.randn(len(written), HKV, D, generator=gen)
    v_pool[written] = torch.randn(len(written), HKV, D, generator=gen)
    B = rng.randint(1, 6)
    lens = [rng.randint(1, min(12, len(written))) for _ in range(B)]
    K = max(lens) + rng.choice([0, 0, rng.randint(1, 3)])  # 有时这一步的宽度比最长的请求还宽
    W = K + rng.choice([0, rng.randint(1, 10), rng.randint(10, 30)])
    dtype = rng.choice([torch.int32, torch.int64])
    kv_indices = torch.empty(B, K, dtype=dtype)
    for b, n in enumerate(lens):
        kv_indices[b, :n] = torch.tensor(rng.sample(written, n))
        kv_indices[b, n:] = torch.tensor([rng.choice(unwritten) for _ in range(K - n)], dtype=dtype)  # 垃圾
    key_mask = torch.arange(K) < torch.tensor(lens)[:, None]
    # 上一次重放留下的：更长的请求、掩码 True、槽位指向没写过的地方
    static_indices = torch.tensor([[rng.randrange(num_slots) for _ in range(W)] for _ in range(B)], dtype=dtype)
    static_mask = torch.rand(W, generator=gen).expand(B, W) < 0.7
    static_mask = static_mask.clone()
    return k_pool, v_pool, kv_indices, key_mask, static_indices, static_mask, lens


def reference_attention(q, k_pool, v_pool, kv_indices, lens):
    outs = []
    for b, n in enumerate(lens):
        k = k_pool[kv_indices[b, :n].long()].transpose(0, 1)[None]  # [1, hkv, n, d]
        v = v_pool[kv_indices[b, :n].long()].transpose(0, 1)[None]
        outs.append(F.scaled_dot_product_attention(q[b][None, :, None, :], k, v, enable_gqa=True)[0, :, 0])
    return torch.stack(outs)


def buffer_attention(q, k_pool, v_pool, static_indices, static_mask):
    B, W = static_indices.shape
    flat = static_indices.flatten().long()
    k = k_pool[flat].view(B, W, HKV, D).transpose(1, 2)
    v = v_pool[flat].view(B, W, HKV, D).transpose(1, 2)
    return F.scaled_dot_product_attention(q[:, :, None, :], k, v, attn_mask=static_mask[:, None, None, :],
                                          enable_gqa=True)[:, :, 0]


def check_case(mod, rng: random.Random, gen: torch.Generator) -> None:
    k_pool, v_pool, kv_indices, key_mask, static_indices, static_mask, lens = make_case(rng, gen)
    inputs = (kv_indices.clone(), key_mask.clone())
    stale = static_indices.clone(), static_mask.clone()
    B, K = kv_indices.shape
    W = static_indices.shape[1]
    what = f"fill_static_metadata（{B} 个请求，key 数 {lens}，K = {K}，W = {W}，{kv_indices.dtype}）"
    mod.fill_static_metadata(kv_indices, key_mask, static_indices, static_mask)
    check(torch.equal(kv_indices, inputs[0]) and torch.equal(key_mask, inputs[1]),
          f"{what} 改动了传进来的 kv_indices 或 key_mask")
    hits = []
    if torch.equal(static_indices, stale[0]) and torch.equal(static_mask, stale[1]):
        hits.append("两块缓冲区一点都没变：要原地写（copy_ 或切片赋值），不能把新张量赋给参数名")
    want_mask = torch.arange(W) < torch.tensor(lens)[:, None]
    if torch.equal(static_mask[:, K:], stale[1][:, K:]) and K < W and not torch.equal(stale[1][:, K:], want_mask[:, K:]):
        hits.append("前 K 列以后的旧掩码没清掉：上一次的 True 还在")
    check(torch.equal(static_mask, want_mask),
          f"{what} 之后 static_mask 不对：\n  应该是 {want_mask.int().tolist()}\n  你的是 {static_mask.int().tolist()}"
          + mistake_hint(hits))
    last = torch.tensor([int(kv_indices[b, n - 1]) for b, n in enumerate(lens)], dtype=kv_indices.dtype)
    want_idx = torch.where(want_mask, torch.cat([kv_indices, last[:, None].expand(B, W - K)], 1), last[:, None])
    if bool((static_indices[:, K:] == kv_indices[:, -1:]).all()) and not torch.equal(static_indices, want_idx):
        hits.append("补齐的列用了 kv_indices 的最后一列：短的请求那一列是垃圾，要用这一行最后一个真实 key 的槽位")
    if bool((static_indices[~want_mask] == 0).all()) and bool((~want_mask).any()):
        hits.append("补齐的列填了槽位 0：它可能从没写过（nan），0 × nan 还是 nan")
    check(torch.equal(static_indices, want_idx),
          f"{what} 之后 static_indices 不对：\n  kv_indices = {kv_indices.tolist()}\n"
          f"  应该是 {want_idx.tolist()}\n  你的是 {static_indices.tolist()}" + mistake_hint(hits))
    q = torch.randn(B, HQ, D, generator=gen)
    got = buffer_attention(q, k_pool, v_pool, static_indices, static_mask)
    check(bool(torch.isfinite(got).all()), f"{what}：用缓冲区算出的注意力里有 nan")
    check_close(got, reference_attention(q, k_pool, v_pool, kv_indices, lens),
                f"{what}：用缓冲区算出的注意力", atol=1e-5, rtol=1e-4)


def check_bad_arguments(mod, rng: random.Random, gen: torch.Generator) -> None:
    _, _, kv, mask, si, sm, lens = make_case(rng, gen)
    while kv.shape[1] < 2:  # “True 不连续”要至少两列
        _, _, kv, mask, si, sm, lens = make_case(rng, gen)
    B, K = kv.shape
    W = si.shape[1]
    no_key = mask.clone()
    no_key[rng.randrange(B)] = False
    holes = mask.clone()
    b = rng.randrange(B)
    holes[b, 0] = False  # 第 0 列是 False，第 1 列是 True
    holes[b, 1] = True
    other = torch.int64 if kv.dtype == torch.int32 else torch.int32
    cases = [
        ("kv_indices 是一维的", (kv[0], mask[0], si, sm)),
        ("行数对不上", (kv, mask, si[:0] if B == 1 else si[:-1], sm[:0] if B == 1 else sm[:-1])),
        ("缓冲区比这一步窄", (torch.cat([kv, kv[:, -1:].expand(B, W - K + 1)], 1),
                               torch.cat([mask, torch.zeros(B, W - K + 1, dtype=torch.bool)], 1), si, sm)),
        ("key_mask 不是 bool", (kv, mask.int(), si, sm)),
        ("static_mask 不是 bool", (kv, mask, si, sm.int())),
        ("槽位的 dtype 不同", (kv, mask, si.to(other), sm)),
        ("有一行一个 key 都没有", (kv, no_key, si, sm)),
        ("有一行的 True 不是从第 0 列起连续的", (kv, holes, si, sm)),
    ]
    for why, args in cases:
        before = [t.clone() for t in args[2:]]
        check_raises(ValueError, mod.fill_static_metadata, *args, what=f"fill_static_metadata（{why}）")
        check(all(torch.equal(t, u) for t, u in zip(args[2:], before)),
              f"fill_static_metadata（{why}）抛出 ValueError 之前已经改动了缓冲区")


def run(mod: object) -> None:
    require(mod, "fill_static_metadata")
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)
    for _ in range(60):
        check_case(mod, rng, gen)
    check_bad_arguments(mod, random.Random(SEED + 1), torch.Generator().manual_seed(SEED + 1))


if __name__ == "__main__":
    main(run)
