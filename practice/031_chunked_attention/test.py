"""练习 031 的评测：和一次算完的因果注意力比较数值，并记下每次 attend 调用的形状。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import bad_int, check, check_close, check_equal, check_raises, check_tensor, check_type, main, require, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


def full_causal(q, k, v):
    """参考：一次算完，逐个头 float64 手算（不用 SDPA、不造右下掩码：n_q == n_k 时就是下三角）。"""
    n, hq, d = q.shape
    group = hq // k.shape[1]
    out = torch.empty(n, hq, d, dtype=torch.float64)
    for h in range(hq):
        qh, kh, vh = q[:, h].double(), k[:, h // group].double(), v[:, h // group].double()
        scores = qh @ kh.T / math.sqrt(d)
        scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        out[:, h] = scores.softmax(-1) @ vh
    return out.to(q.dtype)


class Recorder:
    """提供给学习者的 attend：带 GQA 的掩码注意力，同时记下每次调用的形状。"""

    def __init__(self, marks: list[float] | None = None) -> None:
        self.calls: list[tuple[int, int]] = []
        # 每次调用的结果加上一个评测自己抽的数（学习者看不到）：输出里每一块都得带着它那一次的记号，
        # 说明交回去的就是 attend 的结果，而不是调用完扔掉、自己另算的一份
        self.marks = marks or []

    def __call__(self, q, k, v, mask):
        check_tensor(mask, f"第 {len(self.calls) + 1} 次调用 attend 的 mask")
        check(mask.dtype == torch.bool, f"mask 应该是布尔张量（True 表示能看见），你给的是 {mask.dtype}")
        m, t = q.shape[0], k.shape[0]
        check(tuple(mask.shape) == (m, t) and v.shape[0] == t,
              f"第 {len(self.calls) + 1} 次调用 attend：q 有 {m} 行、k 有 {t} 行、v 有 {v.shape[0]} 行，"
              f"mask 的形状应该是 ({m}, {t})，你给的是 {tuple(mask.shape)}")
        self.calls.append((m, t))
        group = q.shape[1] // k.shape[1]
        kk = k.repeat_interleave(group, dim=1).transpose(0, 1)
        vv = v.repeat_interleave(group, dim=1).transpose(0, 1)
        out = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(0, 1), kk, vv, attn_mask=mask, scale=q.shape[-1] ** -0.5)
        out = out.transpose(0, 1)
        mark = self.marks[len(self.calls) - 1] if len(self.calls) <= len(self.marks) else 0.0
        return out + mark if mark else out


def check_calls(call: str, got_calls, want_calls, chunk: int) -> None:
    if got_calls == want_calls:
        return
    lines = [f"{call} 调用 attend 的方式不对。",
             f"  应该依次是 (query 数, key 数)：{want_calls}", f"  你的调用：{got_calls}"]
    if any(m > chunk for m, _ in got_calls):
        lines.append(f"  有一次送了超过 chunk={chunk} 个 query：要一块一块地算")
    elif any(t > e for (_, t), (_, e) in zip(got_calls, want_calls)):
        lines.append("  你给了某一块它后面的 key：第 [s, e) 块只该看到 key [0, e)，"
                     "多给的 key 数值上被掩码挡住了，分数矩阵却一样大，分块就白做了")
    check(False, "\n".join(lines))


def check_case(mod, n: int, chunk: int, hq: int, hkv: int, d: int, dtype, gen) -> None:
    q = torch.randn(n, hq, d, generator=gen, dtype=dtype)
    k = torch.randn(n, hkv, d, generator=gen, dtype=dtype)
    v = torch.randn(n, hkv, d, generator=gen, dtype=dtype)
    inputs = [t.clone() for t in (q, k, v)]
    call = f"chunked_attention(q[{n}, {hq}, {d}], k/v[{n}, {hkv}, {d}], chunk={chunk})"
    marks = [float(torch.randint(1, 9, (1,), generator=gen)) for _ in range(0, n, chunk)]
    rec = Recorder(marks)
    got = mod.chunked_attention(q, k, v, chunk, rec)
    check_tensor(got, f"{call} 的返回值", shape=(n, hq, d), dtype=dtype)
    for name, t, orig in zip("qkv", (q, k, v), inputs):
        check(torch.equal(t, orig), f"{call} 改动了传进来的 {name}")
    want_calls = [(min(s + chunk, n) - s, min(s + chunk, n)) for s in range(0, n, chunk)]
    check_calls(call, rec.calls, want_calls, chunk)
    got_calls = rec.calls
    tol = 1e-4 if dtype == torch.float32 else 1e-9
    rows = torch.tensor([marks[i // chunk] for i in range(n)], dtype=dtype).view(n, 1, 1)
    check_close(got, full_causal(q, k, v) + rows,
                f"{call} 的输出（和一次算完的因果注意力比；评测给每次 attend 的结果加了一个记号，"
                "输出里第 c 块应当正好是第 c 次 attend 交回的结果）", atol=tol, rtol=tol)
    peak = mod.peak_score_elements(n, chunk, hq)
    check_type(peak, int, f"peak_score_elements({n}, {chunk}, {hq})")
    check_equal(peak, hq * max(m * t for m, t in got_calls),
                f"peak_score_elements({n}, {chunk}, {hq})（各块 num_heads × query 数 × key 数 的最大值）")


def check_example(mod) -> None:
    rec = Recorder()
    gen = torch.Generator().manual_seed(SEED)
    q, k, v = (torch.randn(5, 2, 4, generator=gen) for _ in range(3))
    masks = []
    orig_call = rec.__call__

    def spy(q_, k_, v_, mask):
        masks.append(mask.clone())
        return orig_call(q_, k_, v_, mask)

    mod.chunked_attention(q, k, v, 2, spy)
    check_calls("题目里的例子 chunked_attention(q[5, 2, 4], k/v[5, 2, 4], chunk=2)", rec.calls,
                [(2, 2), (2, 4), (1, 5)], 2)
    want = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    if not torch.equal(masks[1], want):
        hint = ""
        if masks[1].shape == want.shape and torch.equal(masks[1], torch.ones(2, 4, dtype=torch.bool).tril()):
            hint = "\n  你的掩码是左上对齐的（像 is_causal=True）：第 i 个 query 是位置 s + i，要看见 key 0 … s + i"
        check(False, f"题目里的例子：第二块的掩码应该是\n{want.int().tolist()}\n你的是\n{masks[1].int().tolist()}{hint}")
    check_equal(mod.peak_score_elements(5, 2, 1), 8, "peak_score_elements(5, 2, 1)（第二块 2 × 4 = 8，大于最后一块 1 × 5）")


def check_bad_arguments(mod, rng: random.Random) -> None:
    """坏参数：哪一个坏（chunk、k 的行数、v 的行数、k 和 v 一起、q 一行都没有）、坏值是多少
    （就在边界上或者远一些）、张量多大，都随机。"""
    kinds = ["chunk", "k", "v", "k 和 v", "空"] * 3
    rng.shuffle(kinds)
    for kind in kinds:
        n, hkv = rng.randint(1, 12), rng.choice([1, 2])
        hq, d = hkv * rng.choice([1, 2]), rng.choice([4, 8])
        q, k, v = torch.zeros(n, hq, d), torch.zeros(n, hkv, d), torch.zeros(n, hkv, d)
        chunk = rng.randint(1, n + 2)
        if kind == "chunk":
            chunk = bad_int(rng, 1)
        elif kind == "空":
            q, k, v = q[:0], k[:0], v[:0]
        else:  # 行数多了或者少了：差一行，或者差得多
            rows = n + rng.choice([-1, 1, rng.randint(2, 9), -rng.randint(1, n)])
            rows = rows if rows >= 0 and rows != n else n + 1
            bad = torch.zeros(rows, hkv, d)
            k = bad if kind in ("k", "k 和 v") else k
            v = bad if kind in ("v", "k 和 v") else v
        call = (f"chunked_attention(q[{q.shape[0]}, {hq}, {d}], k[{k.shape[0]}, {hkv}, {d}], "
                f"v[{v.shape[0]}, {hkv}, {d}], chunk={chunk})")
        why = {"chunk": "chunk < 1", "空": "q 一行都没有"}.get(kind, "q 与 k、v 的行数不一样")
        check_raises(ValueError, mod.chunked_attention, q, k, v, chunk, Recorder(), what=f"{call}（{why}）")
    for _ in range(6):  # peak_score_elements：n < 1 或 chunk < 1
        n, chunk, heads = rng.randint(1, 40), rng.randint(1, 45), rng.randint(1, 8)
        if rng.random() < 0.5:
            n, why = bad_int(rng, 1), "n < 1"
        else:
            chunk, why = bad_int(rng, 1), "chunk < 1"
        check_raises(ValueError, mod.peak_score_elements, n, chunk, heads,
                     what=f"peak_score_elements({n}, {chunk}, {heads})（{why}）")


def run(mod: object) -> None:
    require(mod, "chunked_attention")
    require(mod, "peak_score_elements")
    torch.set_num_threads(1)
    check_example(mod)
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)
    for _ in range(40):
        hkv = rng.choice([1, 2, 3])
        hq = hkv * rng.choice([1, 2, 4])
        n = rng.randint(1, 70)
        chunk = rng.choice([1, 2, rng.randint(1, 16), rng.randint(1, 80), n])
        dtype = rng.choice([torch.float32, torch.float64])
        check_case(mod, n, chunk, hq, hkv, rng.choice([4, 8, 16]), dtype, gen)
    for n in range(1, 40):  # peak：不只看最后一块
        for chunk in range(1, 45):
            want = max((min(s + chunk, n) - s) * min(s + chunk, n) for s in range(0, n, chunk))
            check_equal(mod.peak_score_elements(n, chunk, 3), 3 * want, f"peak_score_elements({n}, {chunk}, 3)")
    check_bad_arguments(mod, rng)


if __name__ == "__main__":
    main(run)
