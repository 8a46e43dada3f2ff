"""练习 007 的评测：cos/sin 表和 rotate-half RoPE，与 float64 的复数旋转参考实现比较，再查两条性质。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)  # 张量都很小：单线程更快，也不和别的进程抢 CPU 核

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (
    mistake_hint,
    probe_bad_arguments,
    with_bad_item,
    seed,
    CheckFailed,
    check,
    check_close,
    check_tensor,
    main,
    require,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


# ---------------------------------------------------------------------------
# 参考实现：把第 j 维和第 j + D/2 维看成一个复数 x[j] + i·x[j + D/2]，
# 在 float64 里乘上 e^{i·p·θ_j}。不用 cos/sin 表，也不用 rotate_half。
# variant 只用来在出错时猜你错在哪里。
# ---------------------------------------------------------------------------


def ref_theta(head_dim: int, base: float, variant: str = "") -> torch.Tensor:
    j = torch.arange(head_dim // 2, dtype=torch.float64)
    exponent = j / head_dim if variant == "half_exponent" else 2 * j / head_dim
    return torch.tensor(base, dtype=torch.float64) ** (-exponent)


def ref_angles(
    positions: torch.Tensor, head_dim: int, base: float, variant: str = ""
) -> torch.Tensor:
    return positions.to(torch.float64)[:, None] * ref_theta(head_dim, base, variant)[None, :]


def ref_rotate(x: torch.Tensor, angles: torch.Tensor, variant: str = "") -> torch.Tensor:
    """x: [T, H, D]，angles: [T, D/2]（float64）。返回 float64。"""
    d = x.shape[-1]
    x64 = x.detach().to(torch.float64)
    if variant == "interleaved":  # GPT-J 风格：(2j, 2j+1) 成对
        pairs = x64.reshape(*x64.shape[:-1], d // 2, 2)
    else:  # rotate-half：(j, j + D/2) 成对
        pairs = torch.stack([x64[..., : d // 2], x64[..., d // 2 :]], dim=-1)
    z = torch.view_as_complex(pairs.contiguous())  # [T, H, D/2]
    sign = -1.0 if variant == "reversed" else 1.0
    rot = torch.polar(torch.ones_like(angles), sign * angles)[:, None, :]  # [T, 1, D/2]
    out = torch.view_as_real(z * rot)  # [T, H, D/2, 2]
    if variant == "interleaved":
        return out.reshape(x64.shape)
    return torch.cat([out[..., 0], out[..., 1]], dim=-1)


def ref_rope(positions, q, k, head_dim, base, variant=""):
    angle_variant = variant if variant in ("half_exponent",) else ""
    if variant == "arange":  # 把位置当成 0 … T-1
        positions = torch.arange(q.shape[0])
    angles = ref_angles(positions, head_dim, base, angle_variant)
    return ref_rotate(q, angles, variant), ref_rotate(k, angles, variant)


def table_from_ref(head_dim: int, max_position: int, base: float):
    """测试自己的 cos/sin 表（float64 算好再转 float32），评测 apply_rope 时用它，和你的 rope_cache 无关。"""
    angles = ref_angles(torch.arange(max_position), head_dim, base)
    return angles.cos().float(), angles.sin().float()


def cache_atol(max_position: int) -> float:
    # float32 里 p * θ 的舍入误差大约是 p * 6e-8，位置越大越大（Hugging Face 也是这样算的）
    return 2e-6 + 1.5e-7 * max_position


APPLY_TOL = {torch.float32: (2e-5, 1e-5), torch.float64: (2e-5, 1e-5), torch.bfloat16: (2e-2, 2e-2)}


MISTAKES = [
    (
        "interleaved",
        "你的像是 GPT-J 风格（第 2j、2j+1 维成对）；这里要 rotate-half：第 j 维和第 j + D/2 维成对",
    ),
    ("arange", "你的像是把位置当成了 0 … T-1；要按 positions 查表，每一行用自己的位置"),
    ("reversed", "你的旋转方向反了：应该是 (a·cos - b·sin, b·cos + a·sin)"),
    ("half_exponent", "频率的指数不对：θ_j = base ** (-2j / D)，你的像是 base ** (-j / D)"),
]


def guess_mistake(got, which: int, positions, q, k, head_dim, base) -> str:
    if torch.allclose(got.double(), (q, k)[which].double()):
        return "\n  你的输出和输入一样：没有旋转" + (
            "（q 和 k 都要按同样的位置做 RoPE）" if which else ""
        )
    atol, rtol = APPLY_TOL[q.dtype]
    hits = []
    for variant, why in MISTAKES:
        alt = ref_rope(positions, q, k, head_dim, base, variant)[which]
        if torch.allclose(got.double(), alt, atol=atol * 10, rtol=rtol * 10):
            hits.append(why)
    return mistake_hint(hits)


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def check_cache(rope_cache, head_dim: int, max_position: int, base: float):
    call = f"rope_cache(head_dim={head_dim}, max_position={max_position}, base={base:g})"
    result = rope_cache(head_dim, max_position, base)
    check(
        isinstance(result, tuple) and len(result) == 2,
        f"{call} 应该返回二元组 (cos, sin)，你返回的是 {type(result).__name__}",
    )
    cos, sin = result
    shape = (max_position, head_dim // 2)
    for name, t in (("cos", cos), ("sin", sin)):
        try:
            check_tensor(t, f"{call} 返回的 {name}", shape=shape, dtype=torch.float32)
        except CheckFailed as e:
            extra = ""
            if isinstance(t, torch.Tensor) and tuple(t.shape) == (max_position, head_dim):
                extra = "\n  表只要存 D/2 列：每一对共用一个角度（Hugging Face 的 cat(freqs, freqs) 是把同一份存了两遍）"
            raise CheckFailed(f"{e}{extra}") from None
    angles = ref_angles(torch.arange(max_position), head_dim, base)
    atol = cache_atol(max_position)
    for name, t, want in (("cos", cos, angles.cos()), ("sin", sin, angles.sin())):
        try:
            check_close(t.double(), want, f"{call} 返回的 {name}", atol=atol, rtol=0)
        except CheckFailed as e:
            extra = ""
            swapped = angles.sin() if name == "cos" else angles.cos()
            wrong_exp = ref_angles(torch.arange(max_position), head_dim, base, "half_exponent")
            wrong_exp = wrong_exp.cos() if name == "cos" else wrong_exp.sin()
            if torch.allclose(t.double(), swapped, atol=atol):
                extra = "\n  看起来：cos 和 sin 交换了"
            elif torch.allclose(t.double(), wrong_exp, atol=atol):
                extra = "\n  看起来：θ_j 应该是 base ** (-2j / D)，你的像是 base ** (-j / D)"
            raise CheckFailed(f"{e}{extra}") from None
    return cos, sin


def describe(positions, q, k) -> str:
    pos = positions.tolist()
    pos_text = str(pos) if len(pos) <= 12 else f"{pos[:10]} …（共 {len(pos)} 个）"
    return (
        f"positions={pos_text}（{positions.dtype}），q 形状 {tuple(q.shape)}、"
        f"k 形状 {tuple(k.shape)}、{q.dtype}"
    )


def check_apply(apply_rope, positions, q, k, base, cos, sin, *, atol=None, rtol=None) -> None:
    head_dim = q.shape[-1]
    context = describe(positions, q, k) + f"，base={base:g}"
    originals = [t.clone() for t in (positions, q, k, cos, sin)]
    result = apply_rope(positions, q, k, cos, sin)
    what = "apply_rope(positions, q, k, cos, sin)"
    check(
        isinstance(result, tuple) and len(result) == 2,
        f"{what} 应该返回二元组 (q_rot, k_rot)，你返回的是 {type(result).__name__}",
    )
    got_q, got_k = result
    try:
        check_tensor(got_q, f"{what} 返回的 q_rot", shape=tuple(q.shape), dtype=q.dtype)
        check_tensor(got_k, f"{what} 返回的 k_rot", shape=tuple(k.shape), dtype=k.dtype)
    except CheckFailed as e:
        raise CheckFailed(f"{e}\n  输入：{context}") from None
    for name, t, orig in zip(
        ("positions", "q", "k", "cos", "sin"), (positions, q, k, cos, sin), originals
    ):
        check(torch.equal(t, orig), f"{what} 改动了传进来的 {name}，它应该只读\n  输入：{context}")

    want_q, want_k = ref_rope(positions, q, k, head_dim, base)
    default_atol, default_rtol = APPLY_TOL[q.dtype]
    atol = default_atol if atol is None else atol
    rtol = default_rtol if rtol is None else rtol
    for which, (name, got, want) in enumerate((("q_rot", got_q, want_q), ("k_rot", got_k, want_k))):
        try:
            check_close(got.double(), want, f"{what} 返回的 {name}", atol=atol, rtol=rtol)
        except CheckFailed as e:
            guess = guess_mistake(got, which, positions, q, k, head_dim, base)
            raise CheckFailed(f"{e}\n  输入：{context}{guess}") from None


def random_qk(gen, num_tokens, heads, kv_heads, head_dim, dtype, scale=1.0):
    q = (torch.randn(num_tokens, heads, head_dim, generator=gen, dtype=torch.float64) * scale).to(
        dtype
    )
    k = (
        torch.randn(num_tokens, kv_heads, head_dim, generator=gen, dtype=torch.float64) * scale
    ).to(dtype)
    return q, k


def check_properties(apply_rope, gen: torch.Generator, rng: random.Random) -> None:
    """旋转保持长度；旋转之后，q_m · k_n 只和 m - n 有关。"""
    head_dim, base, max_position = 64, 10000.0, 512
    cos, sin = table_from_ref(head_dim, max_position, base)
    for _ in range(20):
        qv = torch.randn(head_dim, generator=gen)
        kv = torch.randn(head_dim, generator=gen)
        m, n = rng.randrange(200), rng.randrange(200)
        shift = rng.randrange(1, 300)
        dots = []
        for mm, nn in ((m, n), (m + shift, n + shift)):
            positions = torch.tensor([mm, nn])
            q = qv.expand(2, 1, head_dim).clone()
            k = kv.expand(2, 1, head_dim).clone()
            q_rot, k_rot = apply_rope(positions, q, k, cos, sin)
            for name, x, x_rot in (("q", q, q_rot), ("k", k, k_rot)):
                check(
                    torch.allclose(x_rot.norm(dim=-1), x.norm(dim=-1), rtol=1e-5),
                    f"旋转应该保持每个头向量的长度：位置 {mm}/{nn} 的 {name} 旋转前长度 "
                    f"{x.norm(dim=-1).flatten().tolist()}，旋转后 {x_rot.norm(dim=-1).flatten().tolist()}",
                )
            dots.append(float(q_rot[0, 0] @ k_rot[1, 0]))  # 位置 mm 的 query · 位置 nn 的 key
        check(
            abs(dots[0] - dots[1]) <= 1e-3 * (1 + abs(dots[0])),
            f"RoPE 之后 q·k 应该只和位置差有关：同一对向量，(q 在 {m}, k 在 {n}) 的点积是 {dots[0]:.6g}，"
            f"都往后挪 {shift} 个位置 (q 在 {m + shift}, k 在 {n + shift}) 却是 {dots[1]:.6g}",
        )


def check_bad_cache_arguments(rope_cache, rng: random.Random) -> None:
    """rope_cache 的坏参数：好的那几个随机，坏值就在边界上或者远一些。"""

    def call(head_dim, max_position, base):  # 按位置传参
        return rope_cache(head_dim, max_position, base)

    for _ in range(2):
        good = dict(head_dim=2 * rng.randint(1, 32), max_position=rng.randint(1, 64),
                    base=rng.choice([100.0, 1e4, 1e6]))
        for key, spoil in [
            ("head_dim", lambda r: 2 * r.randint(0, 64) + 1),  # 奇数
            ("head_dim", lambda r: 0),
            ("head_dim", lambda r: -2 * r.randint(1, 500)),  # 负的偶数：% 2 查不出来
            ("max_position", lambda r: 0),
            ("max_position", lambda r: r.choice([-1, -r.randint(2, 1000)])),
        ]:
            probe_bad_arguments(call, good, {key: spoil}, rng, name="rope_cache", tries=1)


def check_bad_apply_arguments(apply_rope, gen, rng: random.Random) -> None:
    """apply_rope 的坏参数：表的大小、token 数、头数随机；越界的位置在随机的一行上，就在表尾外面一点，
    或者远一些，也有负数；positions、q、k 的行数少几行或者多几行；q 或 k 的 D 和表对不上。"""

    def call(positions, q, k, cos, sin):  # 按位置传参
        return apply_rope(positions, q, k, cos, sin)

    def other_rows(r, t):  # 行数变一变：少几行（可能一行不剩）或者多几行
        n = t.shape[0] + r.choice([-t.shape[0], -1, 1, r.randint(2, 20)])
        return t.repeat(3, *([1] * (t.dim() - 1)))[:n] if n <= 3 * t.shape[0] else t[:1].repeat(n, *([1] * (t.dim() - 1)))

    for _ in range(2):
        head_dim, max_position = 2 * rng.randint(2, 16), rng.randint(8, 64)
        cos, sin = table_from_ref(head_dim, max_position, rng.choice([1e4, 1e6]))
        n, kv_heads = rng.randint(3, 10), rng.choice([1, 2])
        q, k = random_qk(gen, n, kv_heads * rng.choice([1, 2, 3]), kv_heads, head_dim, torch.float32)
        pos = [rng.randrange(max_position) for _ in range(n)]
        positions = torch.tensor(pos, dtype=rng.choice([torch.int64, torch.int32]))
        good = dict(positions=positions, q=q, k=k, cos=cos, sin=sin)

        def bad_positions(values):
            return lambda r: torch.tensor(with_bad_item(r, pos, lambda p, r: r.choice(values(r))), dtype=positions.dtype)

        def other_dim(t):  # 最后一维（D）换一个别的偶数：和表对不上
            return lambda r: t.repeat(1, 1, 3)[..., : r.choice([d for d in range(2, 3 * head_dim + 1, 2) if d != head_dim])]

        for key, spoil, tries in [
            ("positions", bad_positions(lambda r: [max_position, max_position + r.randint(1, 1000)]), 3),  # 超出表
            ("positions", bad_positions(lambda r: [-1, -r.randint(2, 1000)]), 3),  # 负数
            ("positions", lambda r: other_rows(r, positions), 1),
            ("q", lambda r: other_rows(r, q), 1),
            ("k", lambda r: other_rows(r, k), 1),
            ("q", other_dim(q), 1),
            ("k", other_dim(k), 1),
        ]:
            probe_bad_arguments(call, good, {key: spoil}, rng, name="apply_rope", tries=tries)


def run(mod: object) -> None:
    rope_cache = require(mod, "rope_cache")
    apply_rope = require(mod, "apply_rope")
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)

    # ---- cos / sin 表：先一张小表，再 SmolLM2（D=64, base 1e4）、Qwen3（D=128, base 1e6）的样子
    for head_dim, max_position, base in [
        (4, 3, 10000.0),
        (8, 16, 10000.0),
        (64, 2048, 10000.0),
        (128, 4096, 1e6),
        (2, 5, 100.0),
    ]:
        check_cache(rope_cache, head_dim, max_position, base)
    check_bad_cache_arguments(rope_cache, random.Random(SEED + 1))

    # ---- apply_rope：用测试自己的表（和你的 rope_cache 无关）
    base = 10000.0
    cos, sin = table_from_ref(8, 300, base)
    # 一个 token、一个头、位置 1：最好手算
    q = torch.tensor([[[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]])
    k = torch.tensor([[[0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]]])
    check_apply(apply_rope, torch.tensor([1]), q, k, base, cos, sin)
    # 题目里的 decode 批：三个请求各 1 个 token，位置乱序
    check_apply(
        apply_rope,
        torch.tensor([17, 3, 250]),
        *random_qk(gen, 3, 4, 2, 8, torch.float32),
        base,
        cos,
        sin,
    )
    # 带缓存前缀的 prefill：位置从 5 开始，不是 0
    check_apply(
        apply_rope, torch.arange(5, 13), *random_qk(gen, 8, 2, 1, 8, torch.float32), base, cos, sin
    )
    # 两个请求拼在一起的 prefill：[0..3] 接 [40..45]
    positions = torch.cat([torch.arange(0, 4), torch.arange(40, 46)])
    check_apply(apply_rope, positions, *random_qk(gen, 10, 4, 4, 8, torch.float32), base, cos, sin)

    for _ in range(40):
        head_dim = rng.choice([2, 8, 16, 64, 128])
        base = rng.choice([10000.0, 1e6, 500000.0])
        max_position = rng.choice([64, 512, 2048])
        cos, sin = table_from_ref(head_dim, max_position, base)
        num_tokens = rng.randint(1, 12)
        kind = rng.choice(["decode", "prefill", "mixed"])
        if kind == "decode":
            pos = [rng.randrange(max_position) for _ in range(num_tokens)]
        elif kind == "prefill":
            start = rng.randrange(max_position - num_tokens + 1)
            pos = list(range(start, start + num_tokens))
        else:
            pos = sorted(rng.randrange(max_position) for _ in range(num_tokens))
        kv_heads = rng.choice([1, 2, 4])
        heads = kv_heads * rng.choice([1, 2, 3])
        dtype = rng.choice([torch.float32, torch.float32, torch.bfloat16])
        positions = torch.tensor(pos, dtype=rng.choice([torch.int64, torch.int32]))
        q, k = random_qk(gen, num_tokens, heads, kv_heads, head_dim, dtype, rng.choice([1.0, 4.0]))
        check_apply(apply_rope, positions, q, k, base, cos, sin)

    # ---- 性质：长度不变、点积只看位置差
    check_properties(apply_rope, gen, rng)

    # ---- 你自己的表 + 你自己的 apply_rope：Qwen3 的 head_dim 和 base
    cos, sin = rope_cache(128, 1024, 1e6)
    q, k = random_qk(gen, 4, 16, 8, 128, torch.float32)
    atol = cache_atol(1024) * 8
    check_apply(
        apply_rope, torch.tensor([1023, 0, 512, 7]), q, k, 1e6, cos, sin, atol=atol, rtol=1e-4
    )

    # ---- 出错的输入
    check_bad_apply_arguments(apply_rope, gen, random.Random(SEED + 2))

if __name__ == "__main__":
    main(run)
