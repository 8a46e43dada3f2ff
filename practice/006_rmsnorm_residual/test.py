"""练习 006 的评测：RMSNorm 和带残差的 RMSNorm，与 float64 的参考实现比较。

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
from judgekit import (
    mistake_hint,
    probe_bad_arguments,
    seed,
    CheckFailed,
    check,
    check_close,
    check_tensor,
    main,
    require,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现

# 每种 dtype 的容差：float32 很紧（eps 放错位置也查得出来），半精度放宽到它自身的精度
TOLERANCE = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (4e-3, 4e-3),
    torch.bfloat16: (2e-2, 2e-2),
}


# ---------------------------------------------------------------------------
# 参考实现：float64，逐行用 Python 的 math 算均方根（不用 torch 的 mean / rsqrt）。
# variant 只用来在出错时猜你错在哪里。
# ---------------------------------------------------------------------------


def ref_rms_norm(
    x: torch.Tensor, weight: torch.Tensor, eps: float, variant: str = ""
) -> torch.Tensor:
    hidden = x.shape[-1]
    rows = x.detach().double().reshape(-1, hidden).tolist()
    w = weight.detach().double().tolist()
    out = []
    for row in rows:
        if variant == "layernorm":  # 减了均值（那是 LayerNorm）
            mean = math.fsum(row) / hidden
            row = [v - mean for v in row]
        mean_sq = math.fsum(v * v for v in row) / hidden
        if variant == "sum":
            mean_sq = math.fsum(v * v for v in row)
        if variant == "eps_outside":
            scale = 1.0 / (math.sqrt(mean_sq) + eps)
        elif variant == "no_eps":
            scale = 1.0 / math.sqrt(mean_sq) if mean_sq > 0 else 0.0
        else:
            scale = 1.0 / math.sqrt(mean_sq + eps)
        if variant == "no_weight":
            out.append([v * scale for v in row])
        elif variant == "one_plus_weight":  # Gemma 的写法：(1 + weight)
            out.append([v * scale * (1.0 + wi) for v, wi in zip(row, w)])
        else:
            out.append([v * scale * wi for v, wi in zip(row, w)])
    return torch.tensor(out, dtype=torch.float64).reshape(x.shape)


MISTAKES = [
    (
        "eps_outside",
        "eps 应该在根号里面：x / sqrt(mean(x**2) + eps)，你的像是 x / (sqrt(mean(x**2)) + eps)",
    ),
    ("no_eps", "像是没有加 eps"),
    ("layernorm", "像是减了均值——那是 LayerNorm；RMSNorm 直接用 x 的均方根，不减均值"),
    ("sum", "像是用了平方和而不是平方的均值（mean）"),
    ("no_weight", "像是忘了乘 weight"),
    ("one_plus_weight", "像是乘了 (1 + weight)；这里直接乘 weight"),
]


def guess_mistake(got: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, eps: float) -> str:
    if not torch.isfinite(got.double()).all():
        return (
            "\n  你的输出里有 inf 或 nan：多半是在 fp16 里直接平方溢出了（300**2 > 65504）。"
            "先 x.float() 再算，最后转回 x.dtype。"
        )
    atol, rtol = TOLERANCE.get(x.dtype, (1e-5, 1e-5))
    hits = [why for variant, why in MISTAKES
            if torch.allclose(got.double(), ref_rms_norm(x, weight, eps, variant), atol=atol, rtol=rtol)]
    if hits:
        return mistake_hint(hits)
    if x.dtype == torch.float16:
        return (
            "\n  这是 fp16 输入：平方、求均值要在 float32 里做，fp16 里大数会溢出、小数会丢精度。"
        )
    return ""


def describe(x: torch.Tensor, weight: torch.Tensor, eps: float) -> str:
    scale = float(x.detach().double().abs().max()) if x.numel() else 0.0
    return (
        f"x 形状 {tuple(x.shape)}、{x.dtype}（最大绝对值约 {scale:.3g}），"
        f"weight 形状 {tuple(weight.shape)}、{weight.dtype}，eps={eps}"
    )


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def check_norm_output(got, x, weight, eps, what: str, context: str) -> None:
    try:
        check_tensor(got, what, shape=tuple(x.shape), dtype=x.dtype)
    except CheckFailed as e:
        raise CheckFailed(f"{e}\n  输入：{context}") from None
    atol, rtol = TOLERANCE[x.dtype]
    want = ref_rms_norm(x, weight, eps)
    try:
        check_close(got.double(), want, what, atol=atol, rtol=rtol)
    except CheckFailed as e:
        raise CheckFailed(f"{e}\n  输入：{context}" + guess_mistake(got, x, weight, eps)) from None


def check_rms_norm(rms_norm, x, weight, eps) -> None:
    context = describe(x, weight, eps)
    originals = (x.clone(), weight.clone())
    got = rms_norm(x, weight, eps)
    check_norm_output(got, x, weight, eps, "rms_norm(x, weight, eps) 的返回值", context)
    for name, t, orig in zip(("x", "weight"), (x, weight), originals):
        check(
            torch.equal(t, orig), f"rms_norm 改动了传进来的 {name}，它应该只读\n  输入：{context}"
        )


def check_add_rms_norm(add_rms_norm, x, residual, weight, eps) -> None:
    context = describe(x, weight, eps) + (
        "，residual=None" if residual is None else "，带 residual"
    )
    originals = [t.clone() for t in (x, weight) + (() if residual is None else (residual,))]
    result = add_rms_norm(x, residual, weight, eps)
    what = "add_rms_norm(x, residual, weight, eps)"
    check(
        isinstance(result, tuple) and len(result) == 2,
        f"{what} 应该返回一个二元组 (normed, new_residual)，你返回的是 {type(result).__name__}"
        + (f"（长度 {len(result)}）" if isinstance(result, (tuple, list)) else ""),
    )
    normed, new_residual = result
    for name, t in (("normed", normed), ("new_residual", new_residual)):
        try:
            check_tensor(t, f"{what} 返回的 {name}", shape=tuple(x.shape), dtype=x.dtype)
        except CheckFailed as e:
            raise CheckFailed(f"{e}\n  输入：{context}") from None

    inputs = (x, weight) + (() if residual is None else (residual,))
    for t, orig in zip(inputs, originals):
        check(
            torch.equal(t, orig),
            f"{what} 改动了传进来的张量，它应该只读（返回新张量，别用 += 这类原地操作）\n  输入：{context}",
        )

    # 新的残差流：None 时就是 x，否则是 x + residual（不是 norm 之后的值）
    if residual is None:
        check(
            torch.equal(new_residual, x),
            f"residual=None 时，{what} 返回的 new_residual 应该就是 x 本身"
            + ("（你返回的像是 normed）" if torch.equal(new_residual, normed) else "")
            + f"\n  输入：{context}",
        )
        want_residual = x.double()
    else:
        want_residual = x.double() + residual.double()
        atol, rtol = TOLERANCE[x.dtype]
        close = torch.allclose(new_residual.double(), want_residual, atol=atol, rtol=rtol)
        if not close:
            hint = ""
            if torch.allclose(normed.double(), new_residual.double()):
                hint = "\n  你返回的 new_residual 和 normed 一样——残差流要交回“加完、还没 norm”的值 x + residual"
            elif torch.allclose(new_residual.double(), residual.double()):
                hint = "\n  你把传进来的 residual 原样交回去了，没有加上 x"
            elif torch.allclose(new_residual.double(), x.double()):
                hint = "\n  你交回去的是 x，没有加上 residual"
            check(False, f"{what} 返回的 new_residual 应该是 x + residual\n  输入：{context}{hint}")
    rounded = want_residual.to(x.dtype)  # 半精度的加法结果会被舍入成 x.dtype
    check_norm_output(normed, rounded, weight, eps, f"{what} 返回的 normed", context)


def check_residual_chain(add_rms_norm, gen: torch.Generator) -> None:
    """像真实的 decoder 一样把三层串起来：交回去的残差流必须是所有子层输出的累加和。"""
    tokens, hidden, eps = 5, 32, 1e-6
    weight = torch.rand(hidden, generator=gen) + 0.5
    outputs = [torch.randn(tokens, hidden, generator=gen) for _ in range(6)]
    names = [
        "第 0 层 input_layernorm（x = embedding）",
        "第 0 层 post_attention_layernorm（x = 注意力输出）",
        "第 1 层 input_layernorm（x = MLP 输出）",
        "第 1 层 post_attention_layernorm",
        "第 2 层 input_layernorm",
        "第 2 层 post_attention_layernorm",
    ]
    residual = None
    total = torch.zeros(tokens, hidden, dtype=torch.float64)
    for step, (x, name) in enumerate(zip(outputs, names)):
        normed, residual = add_rms_norm(x, residual, weight, eps)
        total = total + x.double()
        check_tensor(
            residual, f"{name} 返回的 new_residual", shape=(tokens, hidden), dtype=torch.float32
        )
        if not torch.allclose(residual.double(), total, atol=1e-5, rtol=1e-5):
            check(
                False,
                f"把 decoder 的子层串起来时，{name} 之后的残差流应该是前 {step + 1} 个子层输出的累加和，"
                f"你的不是（最大误差 {float((residual.double() - total).abs().max()):.3g}）。"
                "每次都要把 add_rms_norm 交回来的 new_residual 原样传给下一次调用，它应该是“加完、还没 norm”的值。",
            )
        check_close(
            normed.double(),
            ref_rms_norm(total, weight, eps),
            f"{name} 返回的 normed",
            atol=1e-5,
            rtol=1e-5,
        )


def random_case(rng: random.Random, gen: torch.Generator, dtype: torch.dtype):
    lead = [rng.randint(1, 6) for _ in range(rng.choice([0, 1, 1, 2]))]
    hidden = rng.choice([1, 2, 8, 24, 64, 128, 576])
    scale = rng.choice([1.0, 1.0, 1e-3, 300.0 if dtype != torch.float32 else 50.0])
    eps = rng.choice([1e-6, 1e-5, 1e-2])
    x = (torch.randn(*lead, hidden, generator=gen, dtype=torch.float64) * scale).to(dtype)
    wdtype = dtype if rng.random() < 0.8 else torch.float32
    weight = (torch.rand(hidden, generator=gen, dtype=torch.float64) * 1.5 + 0.25).to(wdtype)
    return x, weight, eps


def off(r, n):  # 一个不等于 n 的正整数：差一点，或者差很多
    return r.choice([m for m in (n - 1, n + 1, n + r.randint(2, 100), max(1, n // 2)) if m > 0 and m != n])


def check_bad_weight(rms_norm, gen, rng: random.Random) -> None:
    """weight 的形状不对：长度差得随机；元素个数对、却多了一维的（[1, H]、[H, 1]）；和 x 一样形状的。"""

    def call(x, weight, eps):  # 按位置传参
        return rms_norm(x, weight, eps)

    for _ in range(2):
        x, weight, eps = random_case(rng, gen, rng.choice([torch.float32, torch.bfloat16]))
        H = x.shape[-1]
        good = dict(x=x, weight=weight, eps=eps)
        for spoil in (
            lambda r: torch.ones(off(r, H), dtype=weight.dtype),
            lambda r: r.choice([weight.reshape(1, H), weight.reshape(H, 1)]),
            # 和 x 一样形状的（x 是一维时换成几行的）
            lambda r: torch.ones(x.shape if x.dim() > 1 else (r.randint(2, 4), H), dtype=weight.dtype),
        ):
            probe_bad_arguments(call, good, {"weight": spoil}, rng, name="rms_norm", tries=1)


def check_bad_residual(add_rms_norm, gen, rng: random.Random) -> None:
    """residual 的形状和 x 不同：随机一维差得随机；少了前导维、能广播过去的（[H]、x[0] 的形状）；多了一维的。"""

    def call(x, residual, weight, eps):  # 按位置传参
        return add_rms_norm(x, residual, weight, eps)

    for _ in range(2):
        x, weight, eps = random_case(rng, gen, rng.choice([torch.float32, torch.bfloat16]))
        if x.dim() == 1:
            x = x.unsqueeze(0).repeat(rng.randint(2, 4), 1)
        good = dict(x=x, residual=torch.randn(x.shape, generator=gen).to(x.dtype), weight=weight, eps=eps)

        def wrong_dim(r):
            shape = list(x.shape)
            i = r.randrange(len(shape))
            shape[i] = off(r, shape[i])
            return torch.zeros(shape, dtype=x.dtype)

        for spoil in (
            wrong_dim,
            lambda r: torch.zeros(x.shape[r.randrange(1, x.dim()):], dtype=x.dtype),  # 少了前导维：能广播
            lambda r: torch.zeros(1, *x.shape, dtype=x.dtype),  # 多了一维：也能广播
        ):
            probe_bad_arguments(call, good, {"residual": spoil}, rng, name="add_rms_norm", tries=1)


def run(mod: object) -> None:
    rms_norm = require(mod, "rms_norm")
    add_rms_norm = require(mod, "add_rms_norm")
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)

    # 先是好懂的小例子：一行 [3, 4]，均方根 sqrt(12.5)
    x = torch.tensor([[3.0, 4.0]])
    check_rms_norm(rms_norm, x, torch.ones(2), 0.0)
    # 全零的一行：eps 让它不出 nan
    check_rms_norm(rms_norm, torch.zeros(2, 8), torch.ones(8), 1e-6)
    # 小数值的输入，eps 的位置决定结果（float32 容差很紧）
    for _ in range(10):
        x = torch.randn(3, 16, generator=gen) * 1e-3
        check_rms_norm(rms_norm, x, torch.rand(16, generator=gen) + 0.5, 1e-6)
    # fp16 里的大数：平方会溢出，必须在 float32 里算
    x = torch.tensor([[300.0, -250.0, 10.0, 1.0]], dtype=torch.float16)
    check_rms_norm(rms_norm, x, torch.ones(4, dtype=torch.float16), 1e-6)

    for _ in range(60):
        dtype = rng.choice([torch.float32, torch.float16, torch.bfloat16])
        check_rms_norm(rms_norm, *random_case(rng, gen, dtype))

    check_bad_weight(rms_norm, gen, random.Random(SEED + 1))

    # 带残差：先 residual=None，再带 residual
    for _ in range(40):
        dtype = rng.choice([torch.float32, torch.float16, torch.bfloat16])
        x, weight, eps = random_case(rng, gen, dtype)
        check_add_rms_norm(add_rms_norm, x, None, weight, eps)
        residual = (
            torch.randn(x.shape, generator=gen, dtype=torch.float64) * rng.choice([1.0, 20.0])
        ).to(dtype)
        check_add_rms_norm(add_rms_norm, x, residual, weight, eps)
    check_bad_residual(add_rms_norm, gen, random.Random(SEED + 2))

    check_residual_chain(add_rms_norm, gen)


if __name__ == "__main__":
    main(run)
