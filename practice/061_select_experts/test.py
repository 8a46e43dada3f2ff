"""练习 061 的评测：随机的 router_logits（各种量级：接近均匀的、一个专家独大的、50 到 100 之间的大数、
有并列的；float32 为主，也有 bfloat16、float16）、随机的 k，renormalize 开和关，和 float64 里独立算的参考
比较权重（相对误差 1e-6）和专家编号；在 transformers 的 Qwen3MoeTopKRouter 算出的 logits 上和它比；
查 dtype、形状、不改输入、不导入 transformers；坏参数随机挑。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)  # 张量都很小：单线程更快，也不和别的进程抢 CPU 核

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (CheckFailed, bad_int, check, check_raises, check_tensor, learner_modules, main, mistake_hint,
                      probe_bad_arguments, require, seed)

try:  # 比较的对象：HF 的 Qwen3-MoE 路由（transformers 是本书的依赖；万一没装，就用照抄它运算顺序的一份）
    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeTopKRouter
except ImportError:  # pragma: no cover - 书的环境里装着 transformers
    Qwen3MoeConfig = Qwen3MoeTopKRouter = None

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
RTOL, ATOL = 1e-6, 1e-7  # 权重的容差：float32 的 softmax 本来就只差最后一两位

# 常见错误：判词里“看起来是……”的说明
SHORTCUT = ("先取 logits 最大的 k 个、再只对这 k 个做 softmax：renormalize=False 时权重要是在全部 E 个专家上"
            "做 softmax 得到的概率（k 个加起来小于 1），不能只在这 k 个里归一化")
RENORM_WHEN_FALSE = "renormalize=False 时也把 k 个权重除以了它们的和：只有 renormalize=True 时才除"
FORGOT_RENORM = "renormalize=True 时没有把 k 个权重除以它们的和（它们加起来应该等于 1）"
SORTED_BY_ID = "结果按专家编号排了：要和 torch.topk 一样，按权重从大到小排，编号跟着权重走"
LOW_PRECISION = ("softmax 是在输入的 dtype（bfloat16 / float16）里算的，算完才转 float32：要先转成 float32 再算，"
                 "torch.softmax(x, dim=-1, dtype=torch.float32)")
WRONG_DIM = "softmax 做在了第 0 维（token 那一维）上：每个 token 在自己的 E 个专家上做，dim=-1"


# ---------------------------------------------------------------------------
# 参考实现：float64 里减去每行最大值再 exp，整行排序后取前 k 个
# ---------------------------------------------------------------------------


def ref_probs(logits: torch.Tensor) -> torch.Tensor:
    """每行在全部 E 个专家上的 softmax，float64（float32、bfloat16、float16 的值转成 float64 都是精确的）。"""
    x = logits.double()
    e = torch.exp(x - x.max(dim=1, keepdim=True).values)
    return e / e.sum(dim=1, keepdim=True)


def ref_select(logits: torch.Tensor, k: int, renormalize: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(权重 float64 [M, k]，从大到小；这 k 个的原始概率 float64 [M, k])。"""
    top = ref_probs(logits).sort(dim=1, descending=True).values[:, :k]
    return (top / top.sum(dim=1, keepdim=True) if renormalize else top), top


def close(a: torch.Tensor, b: torch.Tensor, rtol: float = 1e-5, atol: float = 1e-7) -> bool:
    return a.shape == b.shape and bool(torch.isclose(a.double(), b.double(), rtol=rtol, atol=atol).all())


def mistakes(logits: torch.Tensor, k: int, renormalize: bool, weights: torch.Tensor, ids: torch.Tensor) -> list[str]:
    """学习者的权重和哪几种常见错误算出来的一样。"""
    full = ref_probs(logits)
    top = full.sort(dim=1, descending=True).values[:, :k]
    normed = top / top.sum(dim=1, keepdim=True)
    hits = []
    if not renormalize and close(weights, normed):
        hits += [SHORTCUT, RENORM_WHEN_FALSE]
    if renormalize and close(weights, top):
        hits.append(FORGOT_RENORM)
    if k > 1 and ids.dtype in (torch.int32, torch.int64) and bool(((ids >= 0) & (ids < full.shape[1])).all()) \
            and bool((ids[:, 1:] > ids[:, :-1]).all()):  # 每行的编号从小到大，权重跟着编号
        mine = full.gather(1, ids.long())
        if close(weights, mine / mine.sum(dim=1, keepdim=True) if renormalize else mine) and not close(mine, top):
            hits.append(SORTED_BY_ID)
    if logits.dtype in (torch.bfloat16, torch.float16):
        eps = torch.finfo(logits.dtype).eps
        if close(weights, normed if renormalize else top, rtol=4 * eps, atol=4 * eps):
            hits.append(LOW_PRECISION)
    if logits.shape[0] > 1:
        x = logits.double()
        p0 = torch.exp(x - x.max(dim=0, keepdim=True).values)
        p0 = (p0 / p0.sum(dim=0, keepdim=True)).sort(dim=1, descending=True).values[:, :k]
        if close(weights, p0 / p0.sum(dim=1, keepdim=True) if renormalize else p0):
            hits.append(WRONG_DIM)
    return hits


# ---------------------------------------------------------------------------
# 随机的 logits
# ---------------------------------------------------------------------------

KINDS = ("normal", "normal", "wide", "large", "peaked", "flat", "ties")


def random_logits(rng: random.Random, gen: torch.Generator, m: int, e: int, kind: str) -> torch.Tensor:
    if kind == "normal":
        x = torch.randn(m, e, generator=gen) * rng.choice([0.5, 1.0, 3.0])
    elif kind == "wide":  # 离最大值很远的专家，float32 的概率下溢成 0（可能和别的 0 并列）
        x = torch.randn(m, e, generator=gen) * 20
    elif kind == "large":  # 全在 50 到 100 之间：不减去最大值就 exp，float32 / bfloat16 都溢出成 inf
        x = 50 + 50 * torch.rand(m, e, generator=gen)
        x[torch.arange(m), torch.randint(0, e, (m,), generator=gen)] = 90 + 10 * torch.rand(m, generator=gen)
    elif kind == "peaked":  # 每个 token 有一个专家独大
        x = torch.randn(m, e, generator=gen)
        x[torch.arange(m), torch.randint(0, e, (m,), generator=gen)] += rng.choice([6.0, 15.0])
    elif kind == "flat":  # 接近均匀：renormalize=False 时每个权重都差不多是 1 / E
        x = torch.randn(m, e, generator=gen) * 0.01
    else:  # 只有几种取值：有并列的，并列的专家哪个在前都算对
        x = torch.randint(-3, 4, (m, e), generator=gen).float() * 0.5
    return x


def random_case(rng: random.Random, gen: torch.Generator, dtype: torch.dtype = torch.float32,
                kind: str | None = None) -> tuple[torch.Tensor, int, str]:
    m, e = rng.randint(1, 64), rng.choice([rng.randint(2, 16), rng.randint(2, 128)])
    k = rng.randint(1, min(e, 8))
    kind = kind or rng.choice(KINDS)
    return random_logits(rng, gen, m, e, kind).to(dtype), k, kind


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def describe(logits: torch.Tensor, k: int, renormalize: bool, kind: str = "") -> str:
    m, e = logits.shape
    dtype = str(logits.dtype).removeprefix("torch.")
    first = ", ".join(f"{v:.4g}" for v in logits[0, :6].double().tolist()) + (", …" if e > 6 else "")
    shown = {"wide": "量级很大", "large": "都在 50 到 100 之间", "peaked": "每行一个专家独大", "flat": "接近均匀",
             "ties": "有并列的"}.get(kind, "")
    return (f"select_experts(router_logits [{m}, {e}] {dtype}{'（' + shown + '）' if shown else ''}，"
            f"top_k={k}，renormalize={renormalize})，第 0 行的 logits 开头是 [{first}]")


def call(mod, logits: torch.Tensor, k: int, renormalize: bool, what: str) -> tuple[torch.Tensor, torch.Tensor]:
    """调用一次，查返回值的样子（类型、形状、dtype）和有没有改动输入。"""
    before = logits.clone()
    got = mod.select_experts(logits, k, renormalize)
    check(isinstance(got, tuple) and len(got) == 2,
          f"{what}：要返回 (topk_weights, topk_ids) 两个张量的 tuple，你返回的是 {type(got).__name__}")
    weights, ids = got
    m = logits.shape[0]
    check_tensor(weights, f"{what} 的 topk_weights", shape=(m, k))
    check_tensor(ids, f"{what} 的 topk_ids", shape=(m, k))
    if weights.dtype != torch.float32:
        extra = ("：softmax 要在 float32 里算，结果也是 float32（torch.softmax(x, dim=-1, dtype=torch.float32)），"
                 "不随输入的 dtype" if logits.dtype != torch.float32 else "")
        raise CheckFailed(f"{what} 的 topk_weights 的 dtype 应该是 torch.float32，你的是 {weights.dtype}{extra}")
    if ids.dtype != torch.int32:
        extra = "：torch.topk 给的编号是 int64，返回前 .to(torch.int32)" if ids.dtype == torch.int64 else ""
        raise CheckFailed(f"{what} 的 topk_ids 的 dtype 应该是 torch.int32，你的是 {ids.dtype}{extra}")
    check(torch.equal(logits, before), f"{what}：改动了传进来的 router_logits（它还要交给别处用）")
    return weights, ids


def check_case(mod, logits: torch.Tensor, k: int, renormalize: bool, kind: str = "") -> None:
    what = describe(logits, k, renormalize, kind)
    weights, ids = call(mod, logits, k, renormalize, what)
    m, e = logits.shape
    if not bool(torch.isfinite(weights).all()):
        i, j = (int(v) for v in (~torch.isfinite(weights)).nonzero()[0])
        raise CheckFailed(f"{what}：topk_weights[{i}, {j}] 是 {float(weights[i, j])}。\n  logits 大的时候（比如 89 以上），"
                          "直接 exp 在 float32 里就溢出成 inf，inf / inf 是 nan：要先减去每行的最大值再 exp"
                          "（torch.softmax 替你做了这一步）")
    want, raw = ref_select(logits, k, renormalize)
    hits = mistakes(logits, k, renormalize, weights, ids)
    if not bool(torch.isclose(weights.double(), want, rtol=RTOL, atol=ATOL).all()):
        bad = ~torch.isclose(weights.double(), want, rtol=RTOL, atol=ATOL)
        i, j = (int(v) for v in bad.nonzero()[0])
        row = ", ".join(f"{v:.7g}" for v in weights[i].tolist())
        want_row = ", ".join(f"{v:.7g}" for v in want[i].tolist())
        sums = f"\n  这一行的权重加起来应该是 {float(want[i].sum()):.7g}，你的是 {float(weights[i].double().sum()):.7g}"
        raise CheckFailed(f"{what}：topk_weights 的数值不对（相对误差要在 {RTOL:g} 以内），"
                          f"{int(bad.sum())}/{bad.numel()} 个超出容差。\n  第 {i} 行应该是 [{want_row}]\n"
                          f"  你的是 [{row}]{sums}" + mistake_hint(hits))
    # 编号：在范围里、每行不重复、每个编号的概率就是参考的第 j 大（有并列时，并列的哪个在前都行）
    outside = ((ids < 0) | (ids >= e)).any(dim=1)
    if bool(outside.any()):
        i = int(outside.nonzero()[0])
        raise CheckFailed(f"{what}：topk_ids 的第 {i} 行有不在 [0, {e}) 里的专家编号：{ids[i].tolist()}")
    sorted_ids = ids.long().sort(dim=1).values
    dup = (sorted_ids[:, 1:] == sorted_ids[:, :-1]).any(dim=1)
    if bool(dup.any()):
        i = int(dup.nonzero()[0])
        raise CheckFailed(f"{what}：topk_ids 的第 {i} 行有重复的专家：{ids[i].tolist()}")
    got_raw = ref_probs(logits).gather(1, ids.long())
    bad = ~torch.isclose(got_raw, raw, rtol=RTOL, atol=ATOL)
    if bool(bad.any()):
        i = int(bad.nonzero()[0][0])
        want_ids = ref_probs(logits)[i].sort(descending=True).indices[:k].tolist()
        raise CheckFailed(f"{what}：topk_ids 的第 {i} 行不对。\n  应该是 {want_ids}（概率从大到小："
                          f"{', '.join(f'{v:.4g}' for v in raw[i].tolist())}）\n  你的是 {ids[i].tolist()}"
                          f"（这几个专家的概率：{', '.join(f'{v:.4g}' for v in got_raw[i].tolist())}）"
                          + mistake_hint(hits))


def check_against_hf(mod, rng: random.Random, gen: torch.Generator) -> None:
    """transformers 的 Qwen3MoeTopKRouter：同一份 logits 上，编号一样，权重在容差之内。"""
    for i in range(8):
        renormalize = i % 2 == 0
        hidden, e, m = rng.choice([16, 32, 64]), rng.randint(4, 128), rng.randint(1 if i > 5 else 16, 64)
        k = rng.randint(1 if i > 5 else 2, min(e, 8))  # k = 1 时归一化之后正好是 1.0，分不出运算顺序
        weight = torch.randn(e, hidden, generator=gen) * rng.choice([0.05, 0.3, 2.0])
        x = torch.randn(m, hidden, generator=gen)
        with torch.no_grad():
            if Qwen3MoeTopKRouter is not None:
                router = Qwen3MoeTopKRouter(Qwen3MoeConfig(hidden_size=hidden, num_experts=e, num_experts_per_tok=k,
                                                           norm_topk_prob=renormalize))
                router.weight.copy_(weight)
                logits, want, want_ids = router(x)
            else:  # 照抄 HF 的运算顺序
                logits = torch.nn.functional.linear(x, weight)
                want, want_ids = torch.topk(torch.softmax(logits, dim=-1, dtype=torch.float), k, dim=-1)
                if renormalize:
                    want /= want.sum(dim=-1, keepdim=True)
        logits = logits.detach().contiguous()
        what = describe(logits, k, renormalize) + "（logits 来自 HF 的 Qwen3MoeTopKRouter）"
        check_case(mod, logits, k, renormalize)  # 先按容差比，判词好懂
        weights, ids = call(mod, logits, k, renormalize, what)
        probs = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True).values[:, : k + 1]
        if bool((probs[:, 1:] == probs[:, :-1]).any()):
            continue  # 有并列：哪个在前取决于 topk 的实现，不比编号
        if not torch.equal(ids.long(), want_ids):
            r = int((ids.long() != want_ids).any(dim=1).nonzero()[0])
            raise CheckFailed(f"{what}：topk_ids 的第 {r} 行应该是 {want_ids[r].tolist()}，你的是 {ids[r].tolist()}")
        if not torch.allclose(weights, want, rtol=1e-6, atol=1e-7):
            r, j = (int(v) for v in (~torch.isclose(weights, want, rtol=1e-6, atol=1e-7)).nonzero()[0])
            raise CheckFailed(f"{what}：第 {r} 行第 {j} 个权重和 HF 的路由差得太多：HF 是 {float(want[r, j])!r}，"
                              f"你的是 {float(weights[r, j])!r}（要求相对误差在 1e-6 以内）")


def check_bad_arguments(mod, rng: random.Random, gen: torch.Generator) -> None:
    m, e = rng.randint(1, 8), rng.randint(2, 16)
    k = rng.randint(1, min(e, 8))
    logits = torch.randn(m, e, generator=gen)
    good = {"router_logits": logits, "top_k": k, "renormalize": rng.random() < 0.5}
    bad_k = lambda r: r.choice([bad_int(r, 1), e + r.randint(1, 5), e + 1, True, float(k), str(k), None])  # noqa: E731
    bad_logits = lambda r: r.choice([  # noqa: E731
        logits[0], logits[None], torch.randint(-5, 5, (m, e), generator=gen), logits > 0,
        logits[:0], logits[:, :0], torch.tensor(1.5)])
    probe_bad_arguments(mod.select_experts, good, {"top_k": bad_k, "router_logits": bad_logits}, rng,
                        name="select_experts", tries=12)
    check_raises(ValueError, mod.select_experts, logits, True, False,
                 what=f"select_experts(张量(形状 {(m, e)}, float32), top_k=True, ...)（bool 不是 int）")


def run(mod: object) -> None:
    require(mod, "select_experts")
    rng = random.Random(SEED)
    gen = torch.Generator().manual_seed(SEED)
    # 第一个：renormalize=False，还有不少概率落在没选上的专家上（先取前 k 个再 softmax 的写法在这里露馅）
    e = rng.randint(6, 32)
    check_case(mod, torch.randn(rng.randint(2, 8), e, generator=gen), rng.randint(1, 3), False)
    for i in range(40):  # float32，renormalize 开关轮流，关的多一些
        logits, k, kind = random_case(rng, gen, kind=("large" if i == 0 else None))
        check_case(mod, logits, k, i % 3 == 0, kind)
    for i in range(12):  # 低精度的输入：softmax 照样在 float32 里算
        dtype = torch.bfloat16 if i % 3 else torch.float16
        logits, k, kind = random_case(rng, gen, dtype, kind=rng.choice(["normal", "normal", "large", "peaked", "wide"]))
        check_case(mod, logits, k, i % 2 == 0, kind)
    check_against_hf(mod, rng, gen)
    check_bad_arguments(mod, random.Random(SEED + 1), torch.Generator().manual_seed(SEED + 1))
    loaded = [name for name in learner_modules(mod) if name.split(".")[0] == "transformers"]
    check(not loaded, "你的代码导入了 transformers：这道题要你自己写路由（引擎的 select_experts 不依赖 transformers）")


if __name__ == "__main__":
    main(run)
