"""练习 001 的评测：先查掩码（方阵、带缓存、decode），再在随机形状上把注意力和手算的参考实现比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import CheckFailed, check, check_close, check_tensor, main, require, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


# ---------------------------------------------------------------------------
# 参考实现：不造掩码张量，也不复制 KV 头——逐个 query、逐个头，
# 直接数出它能看见哪些 key，手算 softmax（float64）。
# mask / head_map / scale 这几个开关只用来在出错时猜你错在哪里。
# ---------------------------------------------------------------------------


def ref_visible(n: int, m: int, i: int) -> int:
    """第 i 个 query 能看见的 key 个数：绝对位置 0 … m - n + i。"""
    return m - n + i + 1


def ref_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mask: str = "bottom_right",
    head_map: str = "interleave",
    scale: float | None = None,
) -> torch.Tensor:
    n, num_heads, head_dim = q.shape
    m, num_kv_heads, _ = k.shape
    group = num_heads // num_kv_heads
    if scale is None:
        scale = 1.0 / math.sqrt(head_dim)
    q64, k64, v64 = q.double(), k.double(), v.double()
    out = torch.zeros(n, num_heads, head_dim, dtype=torch.float64)
    for i in range(n):
        if mask == "bottom_right":
            visible = ref_visible(n, m, i)
        elif mask == "top_left":
            visible = min(i + 1, m)
        else:  # "none"
            visible = m
        for h in range(num_heads):
            kv = h // group if head_map == "interleave" else h % num_kv_heads
            keys = k64[:visible, kv]  # [visible, D]
            scores = [float(s) * scale for s in keys @ q64[i, h]]
            top = max(scores)
            weights = [math.exp(s - top) for s in scores]
            total = sum(weights)
            for j, w in enumerate(weights):
                out[i, h] += (w / total) * v64[j, kv]
    return out.to(q.dtype)


def mask_rows(mask: torch.Tensor) -> list[str]:
    return ["".join("1" if x else "0" for x in row) for row in mask.tolist()]


def describe(n: int, m: int, num_heads: int, num_kv_heads: int, head_dim: int, dtype) -> str:
    cached = m - n
    if n == 1 and m > 1:
        kind = f"decode：1 个 query，缓存里已有 {cached} 个 token"
    elif cached:
        kind = f"带缓存的 prefill：缓存里已有 {cached} 个 token，这一步 {n} 个 query"
    else:
        kind = f"没有缓存的 prefill：{n} 个 query"
    group = num_heads // num_kv_heads
    gqa = (
        "MHA（每个 query 头有自己的 KV 头）"
        if group == 1
        else f"GQA 每 {group} 个 query 头共用 1 个 KV 头"
    )
    return (
        f"q 形状 {(n, num_heads, head_dim)}、k/v 形状 {(m, num_kv_heads, head_dim)}、{dtype}"
        f"（{kind}；{gqa}）"
    )


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def check_mask(causal_mask, n: int, m: int) -> None:
    call = f"causal_mask({n}, {m})"
    got = causal_mask(n, m)
    check_tensor(got, f"{call} 的返回值", shape=(n, m), dtype=torch.bool)
    want = torch.tensor([[j < ref_visible(n, m, i) for j in range(m)] for i in range(n)])
    if torch.equal(got, want):
        return
    bad_row = int((got != want).any(dim=1).nonzero()[0])
    pos = m - n + bad_row
    seen = [j for j in range(m) if bool(got[bad_row, j])]
    seen_text = (
        "没有任何 key" if not seen else f" key {seen}" if len(seen) <= 8 else f" {len(seen)} 个 key"
    )
    lines = [
        f"{call} 不对（缓存里已有 {m - n} 个 token，这一步 {n} 个新 query）。",
        (
            f"  第 {bad_row} 行：这个 query 的绝对位置是 {m - n} + {bad_row} = {pos}，"
            f"应该能看见 key 0…{pos}（共 {pos + 1} 个），你的掩码让它看见的是{seen_text}。"
        ),
    ]
    if m <= 16 and n <= 8:
        lines.append("  应该是：      你的是：")
        for a, b in zip(mask_rows(want), mask_rows(got)):
            lines.append(f"  {a:<12}  {b}")
    top_left = torch.ones(n, m, dtype=torch.bool).tril()
    if torch.equal(got, top_left):
        lines.append(
            "  你的掩码是左上角对齐的下三角（tril），它把新 query 当成了位置 0、1、2……"
            "只有 query 和 key 一样多（没有缓存）时才对。有缓存时要按绝对位置右下角对齐。"
        )
    check(False, "\n".join(lines))


def guess_mistake(got: torch.Tensor, q, k, v) -> str:
    """输出不对时，看看它是不是恰好等于某种常见的错法。"""
    head_dim = q.shape[2]
    guesses = [
        ({"mask": "top_left"}, "掩码是左上角对齐的（tril / is_causal=True），有缓存时要右下角对齐"),
        ({"mask": "none"}, "像是根本没加因果掩码：每个 query 都看见了全部 key"),
        (
            {"head_map": "modulo"},
            (
                "GQA 的分组不对：query 头 h 应该用 KV 头 h // group（repeat_interleave），"
                "你的像是 h % Hkv（repeat）"
            ),
        ),
        ({"scale": 1.0}, "像是忘了除以 sqrt(D)"),
        ({"scale": 1.0 / head_dim}, "缩放应该是 1/sqrt(D)，你的像是 1/D"),
    ]
    for kwargs, why in guesses:
        alt = ref_attention(q, k, v, **kwargs)
        if alt.shape == got.shape and torch.allclose(
            got.double(), alt.double(), atol=1e-4, rtol=1e-4
        ):
            return "\n  看起来：" + why
    return ""


def check_attention(attention, q, k, v) -> None:
    n, num_heads, head_dim = q.shape
    m, num_kv_heads, _ = k.shape
    context = describe(n, m, num_heads, num_kv_heads, head_dim, q.dtype)
    originals = [t.clone() for t in (q, k, v)]

    got = attention(q, k, v)
    what = "attention(q, k, v) 的返回值"
    try:
        check_tensor(got, what, shape=(n, num_heads, head_dim), dtype=q.dtype)
    except CheckFailed as e:
        raise CheckFailed(f"{e}\n  输入：{context}") from None
    for name, t, orig in zip("qkv", (q, k, v), originals):
        check(
            torch.equal(t, orig), f"attention 改动了传进来的 {name}，它应该只读\n  输入：{context}"
        )

    want = ref_attention(q, k, v)
    try:
        check_close(got, want, what, atol=1e-5, rtol=1e-4)
    except CheckFailed as e:
        raise CheckFailed(f"{e}\n  输入：{context}" + guess_mistake(got, q, k, v)) from None


def random_qkv(gen: torch.Generator, n, m, num_heads, num_kv_heads, head_dim, dtype):
    q = torch.randn(n, num_heads, head_dim, generator=gen, dtype=torch.float64).to(dtype)
    k = torch.randn(m, num_kv_heads, head_dim, generator=gen, dtype=torch.float64).to(dtype)
    v = torch.randn(m, num_kv_heads, head_dim, generator=gen, dtype=torch.float64).to(dtype)
    return q, k, v


def run(mod: object) -> None:
    causal_mask = require(mod, "causal_mask")
    attention = require(mod, "attention")
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)

    # 掩码：先是没有缓存的方阵（下三角），再是第 0 章的例子（缓存 2 个、喂 3 个）、decode，最后一大批随机的
    for n, m in [(1, 1), (3, 3), (4, 4), (3, 5), (1, 5), (2, 7)]:
        check_mask(causal_mask, n, m)
    for _ in range(200):
        m = rng.randint(1, 40)
        n = rng.choice([m, 1, rng.randint(1, m)])
        check_mask(causal_mask, n, m)

    # 注意力：几个好懂的形状，再一大批随机的
    fixed = [
        (3, 3, 2, 2, 4),  # 没有缓存，MHA
        (3, 5, 2, 2, 4),  # 第 0 章的例子：缓存 2 个、喂 3 个
        (1, 6, 4, 2, 8),  # decode，GQA 2
        (4, 4, 6, 2, 8),  # 没有缓存，GQA 3
        (5, 12, 9, 3, 64),  # SmolLM2 的头布局：9 个 query 头、3 个 KV 头、head_dim 64
        (2, 9, 16, 8, 32),  # tiny Qwen3 的头布局：16 对 8
    ]
    for n, m, hq, hkv, d in fixed:
        check_attention(attention, *random_qkv(gen, n, m, hq, hkv, d, torch.float32))
    for _ in range(120):
        m = rng.randint(1, 24)
        n = rng.choice([m, 1, rng.randint(1, m)])
        hkv = rng.choice([1, 2, 3, 4])
        hq = hkv * rng.choice([1, 2, 3])
        d = rng.choice([4, 8, 16, 32, 64])
        dtype = rng.choice([torch.float32, torch.float32, torch.float64])
        check_attention(attention, *random_qkv(gen, n, m, hq, hkv, d, dtype))


if __name__ == "__main__":
    main(run)
