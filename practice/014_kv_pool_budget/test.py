"""练习 014 的评测：题目表格里的每一格、几百组随机配置，都和独立写的参考实现比较；再查坏参数。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parent.parent)
)  # 找到 practice/judgekit.py
from judgekit import (
    bad_int,
    check_equal,
    check_raises,
    check_type,
    main,
    probe_bad_arguments,
    require,
    seed,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
GiB = 1 << 30

# ---------------------------------------------------------------------------
# 参考实现：不分情况——把第 h 个头看成 [h/H, (h+1)/H)、第 r 个 rank 看成 [r/T, (r+1)/T)，
# 两段重叠就是 rank r 要存头 h。切分和复制是同一条规则；哪个 rank 存的头数不一样，就是分不了。
# ---------------------------------------------------------------------------

REF_SIZES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}


def ref_heads_of_rank(num_heads: int, tp_size: int, rank: int) -> list[int]:
    return [
        h
        for h in range(num_heads)
        if h * tp_size < (rank + 1) * num_heads and rank * num_heads < (h + 1) * tp_size
    ]


def ref_local_heads(num_heads: int, tp_size: int) -> int | None:
    """None 表示分不了。"""
    if num_heads < 1 or tp_size < 1:
        return None
    counts = {len(ref_heads_of_rank(num_heads, tp_size, r)) for r in range(tp_size)}
    # 每个 rank 存的头数一样，而且（复制时）每个头被复制的份数也一样，才算分得了
    copies = {
        sum(h in ref_heads_of_rank(num_heads, tp_size, r) for r in range(tp_size))
        for h in range(num_heads)
    }
    if len(counts) != 1 or len(copies) != 1:
        return None
    return counts.pop()


def ref_bytes_per_token(
    layers: int, heads: int, head_dim: int, dtype: str, tp: int
) -> int:
    local = ref_local_heads(heads, tp)
    k_bytes = local * head_dim * REF_SIZES[dtype]  # 一层的 K
    return layers * (k_bytes + k_bytes)  # 每层 K 和 V 各一份


def ref_num_pages(budget: int, per_page: int) -> int:
    """二分：最大的 n，使 n 页放得进预算。"""
    lo, hi = 0, budget // 1 + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid * per_page <= budget:
            lo = mid
        else:
            hi = mid
    return lo


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------

MODELS = {"SmolLM2-135M": (30, 3, 64), "Qwen3-0.6B": (28, 8, 128)}


def guess_bytes_mistake(
    got: int, layers: int, heads: int, head_dim: int, dtype: str, tp: int
) -> str:
    want = ref_bytes_per_token(layers, heads, head_dim, dtype, tp)
    size = REF_SIZES[dtype]
    if got * 2 == want:
        return "\n  看起来：少乘了 2——每层要存 K 和 V 两份"
    if got == want // size:
        return "\n  看起来：算成了元素个数，还要乘每个元素的字节数"
    if got == 2 * layers * heads * head_dim * size and heads != ref_local_heads(
        heads, tp
    ):
        return (
            "\n  看起来：用了全部 KV 头，应该只算这个 rank 存的那几个（local_kv_heads）"
        )
    if heads < tp and got == 0:
        return "\n  看起来：KV 头比 rank 少时直接整除得到 0 了，这时应该复制：每个 rank 存 1 个头"
    return ""


def check_config(
    mod,
    layers: int,
    heads: int,
    head_dim: int,
    dtype: str,
    tp: int,
    budget: int,
    page_size: int,
) -> None:
    local = ref_local_heads(heads, tp)
    if local is None:
        check_raises(
            ValueError,
            mod.local_kv_heads,
            heads,
            tp,
            what=f"local_kv_heads({heads}, {tp})（{heads} 个 KV 头既不能平均分给 {tp} 个 rank，也不能平均复制）",
        )
        check_raises(
            ValueError,
            mod.kv_bytes_per_token,
            layers,
            heads,
            head_dim,
            dtype,
            tp,
            what=f"kv_bytes_per_token({layers}, {heads}, {head_dim}, {dtype!r}, {tp})（{heads} 个 KV 头分不给 {tp} 个 rank）",
        )
        return

    call = f"local_kv_heads({heads}, {tp})"
    got = mod.local_kv_heads(heads, tp)
    check_type(got, int, f"{call} 的返回值")
    check_equal(got, local, call)

    call = f"kv_bytes_per_token({layers}, {heads}, {head_dim}, {dtype!r}, {tp})"
    got = mod.kv_bytes_per_token(layers, heads, head_dim, dtype, tp)
    check_type(got, int, f"{call} 的返回值")
    want = ref_bytes_per_token(layers, heads, head_dim, dtype, tp)
    if got != want:
        context = f"每个 rank 存 {local} 个 KV 头" + guess_bytes_mistake(
            got, layers, heads, head_dim, dtype, tp
        )
        check_equal(got, want, call, context)

    call = f"num_pages({budget}, {layers}, {heads}, {head_dim}, {dtype!r}, page_size={page_size}, tp_size={tp})"
    got = mod.num_pages(budget, layers, heads, head_dim, dtype, page_size, tp)
    check_type(got, int, f"{call} 的返回值")
    want = ref_num_pages(budget, want * page_size)
    check_equal(
        got,
        want,
        call,
        f"每个 token {ref_bytes_per_token(layers, heads, head_dim, dtype, tp)} 字节，每页 {page_size} 个 token，只算整页",
    )


def check_dtypes(mod) -> None:
    for name, size in REF_SIZES.items():
        got = mod.dtype_bytes(name)
        check_type(got, int, f"dtype_bytes({name!r}) 的返回值")
        check_equal(got, size, f"dtype_bytes({name!r})")


def _known(r: random.Random) -> str:
    return r.choice(list(REF_SIZES))


# 不认识的 dtype 名字，一类一个：缩写、torch. 前缀、别的 dtype、大小写不对、多了空格、空串
DTYPE_KINDS = [
    lambda r: r.choice(["fp32", "bf16", "fp16", "fp64", "half", "float", "double"]),
    lambda r: "torch." + _known(r),
    lambda r: r.choice(["int8", "int32", "int64", "uint8", "bool", "complex64", "float8_e4m3fn"]),
    lambda r: r.choice([str.capitalize, str.upper])(_known(r)),
    lambda r: r.choice(["{} ", " {}", "{}\n"]).format(_known(r)),
    lambda r: "",
]


def bad_dtype(r: random.Random) -> str:
    return r.choice(DTYPE_KINDS)(r)


def check_bad_arguments(mod, rng: random.Random) -> None:
    """坏参数：配置随机，每次只坏一个参数；每个下界都查两次：就在边界上一次、远一些一次
    （只拦一个写死的坏值的代码过不去）；分不了的 KV 头数和 tp_size 随机挑。"""

    def local(num_kv_heads, tp_size):  # 按位置传参
        return mod.local_kv_heads(num_kv_heads, tp_size)

    def per_token(num_layers, num_kv_heads, head_dim, dtype, tp_size):
        return mod.kv_bytes_per_token(num_layers, num_kv_heads, head_dim, dtype, tp_size)

    def pages(budget_bytes, num_layers, num_kv_heads, head_dim, dtype, page_size, tp_size):
        return mod.num_pages(budget_bytes, num_layers, num_kv_heads, head_dim, dtype, page_size, tp_size)

    def size_of(dtype):
        return mod.dtype_bytes(dtype)

    for spoil in DTYPE_KINDS:
        probe_bad_arguments(size_of, {}, {"dtype": spoil}, rng, name="dtype_bytes", tries=1)
    for _ in range(2):
        heads = rng.choice([1, 2, 3, 4, 6, 8, 12, 16])
        tp = rng.choice([t for t in (1, 2, 3, 4, 8, 16) if ref_local_heads(heads, t) is not None
                         and t * heads > 1])  # 1 个头、1 个 rank 没有分不了的配对可挑
        # 分不了：KV 头比 rank 多却除不尽，或者比 rank 少、rank 数又不是它的倍数
        unsplit_heads = [h for h in range(2, 4 * tp + 3) if ref_local_heads(h, tp) is None]
        unsplit_tps = [t for t in range(2, 4 * heads + 3) if ref_local_heads(heads, t) is None]
        heads_kinds = [
            ("num_kv_heads", lambda r: 0), ("num_kv_heads", lambda r: bad_int(r, 0)),  # 0 或负数
            ("tp_size", lambda r: 0), ("tp_size", lambda r: bad_int(r, 0)),
        ]
        if unsplit_heads:
            heads_kinds.append(("num_kv_heads", lambda r: r.choice(unsplit_heads)))
        if unsplit_tps:
            heads_kinds.append(("tp_size", lambda r: r.choice(unsplit_tps)))
        size_kinds = [
            ("num_layers", lambda r: 0), ("num_layers", lambda r: bad_int(r, 0)),
            ("head_dim", lambda r: 0), ("head_dim", lambda r: bad_int(r, 0)),
            ("dtype", bad_dtype),
        ]
        good = dict(num_kv_heads=heads, tp_size=tp)
        for key, spoil in heads_kinds:
            probe_bad_arguments(local, good, {key: spoil}, rng, name="local_kv_heads", tries=1)
        good = dict(num_layers=rng.randint(1, 96), num_kv_heads=heads, head_dim=rng.choice([32, 64, 128]),
                    dtype=rng.choice(list(REF_SIZES)), tp_size=tp)
        for key, spoil in heads_kinds + size_kinds:
            probe_bad_arguments(per_token, good, {key: spoil}, rng, name="kv_bytes_per_token", tries=1)
        good = dict(budget_bytes=rng.choice([0, rng.randint(0, 10**6), rng.randint(0, 80 * GiB)]), **good,
                    page_size=rng.choice([1, 4, 16, 64]))
        budget_kinds = [
            ("budget_bytes", lambda r: -1), ("budget_bytes", lambda r: bad_int(r, -1)),  # 负数
            ("page_size", lambda r: 0), ("page_size", lambda r: bad_int(r, 0)),
        ]
        for key, spoil in heads_kinds + size_kinds + budget_kinds:
            probe_bad_arguments(pages, good, {key: spoil}, rng, name="num_pages", tries=1)
    # 预算连一页都放不下：0 页，不是错
    got = mod.num_pages(1000, 28, 8, 128, "float32", 1, 1)
    check_equal(
        got,
        0,
        "num_pages(1000, 28, 8, 128, 'float32', 1, 1)（1000 字节连一个 token 都放不下）",
    )


def run(mod: object) -> None:
    for name in ("dtype_bytes", "local_kv_heads", "kv_bytes_per_token", "num_pages"):
        require(mod, name)

    check_dtypes(mod)
    # 题目里的表格
    for name, (layers, heads, head_dim) in MODELS.items():
        for dtype in ("float32", "bfloat16"):
            for tp in (1, 2, 3, 16):
                check_config(mod, layers, heads, head_dim, dtype, tp, GiB, 16)
    # 默认参数 tp_size=1
    got = mod.kv_bytes_per_token(28, 8, 128, "bfloat16")
    check_equal(
        got,
        ref_bytes_per_token(28, 8, 128, "bfloat16", 1),
        "kv_bytes_per_token(28, 8, 128, 'bfloat16')（不写 tp_size 就是 1）",
    )
    got = mod.num_pages(GiB, 28, 8, 128, "bfloat16", 16)
    check_equal(
        got,
        585,
        "num_pages(2**30, 28, 8, 128, 'bfloat16', 16)（题目里的例子，不写 tp_size）",
    )

    rng = random.Random(SEED)
    for _ in range(400):
        layers = rng.randint(1, 96)
        heads = rng.choice([1, 2, 3, 4, 6, 8, 12, 16, 32])
        tp = rng.choice([1, 2, 3, 4, 8, 16, 32])
        head_dim = rng.choice([32, 64, 80, 96, 128, 256])
        dtype = rng.choice(list(REF_SIZES))
        page_size = rng.choice([1, 1, 4, 16, 32, 64, 256])
        budget = rng.choice([0, rng.randint(0, 10**6), rng.randint(0, 80 * GiB)])
        check_config(mod, layers, heads, head_dim, dtype, tp, budget, page_size)

    check_bad_arguments(mod, random.Random(SEED + 1))


if __name__ == "__main__":
    main(run)
