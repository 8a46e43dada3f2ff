"""练习 015 的评测：变长批次的元数据逐项和独立写的参考实现比较，掩码也一样。

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
    seed,
    bad_int,
    probe_bad_arguments,
    with_bad_item,
    check,
    check_equal,
    check_int_list,
    check_type,
    main,
    require,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现

# ---------------------------------------------------------------------------
# 参考实现：先把整批展开成一个个 token（请求编号, 位置），所有字段都从这张表里数出来
# ---------------------------------------------------------------------------


def ref_metadata(spans: list[tuple[int, int]]) -> dict[str, object]:
    tokens = [
        (r, pos)
        for r, (cached, device) in enumerate(spans)
        for pos in range(cached, device)
    ]
    n = len(spans)
    q_lens = [sum(1 for r, _ in tokens if r == i) for i in range(n)]
    k_lens = [
        max((pos for r, pos in tokens if r == i), default=-1) + 1 for i in range(n)
    ]
    # 下标 j 是第 i 个请求的最后一个 token ⇔ 下一个 token 属于别的请求（或者没有下一个）
    last = [
        j
        for j, (r, _) in enumerate(tokens)
        if j + 1 == len(tokens) or tokens[j + 1][0] != r
    ]
    cu_q = [sum(q_lens[:i]) for i in range(n + 1)]
    cu_k = [sum(k_lens[:i]) for i in range(n + 1)]
    return {
        "q_lens": q_lens,
        "k_lens": k_lens,
        "cu_seqlens_q": cu_q,
        "cu_seqlens_k": cu_k,
        "max_seqlen_q": max([0, *q_lens]),
        "max_seqlen_k": max([0, *k_lens]),
        "positions": [pos for _, pos in tokens],
        "req_of_token": [r for r, _ in tokens],
        "last_indices": last,
    }


def ref_mask(cached_len: int, device_len: int) -> list[list[int]]:
    rows = []
    for i in range(device_len - cached_len):
        visible = cached_len + i + 1  # 第 i 个 query 能看见的 key 个数
        rows.append([1] * visible + [0] * (device_len - visible))
    return rows


INT_FIELDS = ("max_seqlen_q", "max_seqlen_k")
LIST_FIELDS = (
    "q_lens",
    "k_lens",
    "cu_seqlens_q",
    "cu_seqlens_k",
    "positions",
    "req_of_token",
    "last_indices",
)

# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def check_batch(build_metadata, spans: list[tuple[int, int]]) -> None:
    context = f"spans = {spans}"
    got = build_metadata(spans)
    want = ref_metadata(spans)
    for name in LIST_FIELDS + INT_FIELDS:
        check(
            hasattr(got, name), f"build_metadata 的返回值上没有字段 {name}（{context}）"
        )
    for name in INT_FIELDS:
        check_type(getattr(got, name), int, f"build_metadata(...).{name}")
    for name in LIST_FIELDS:
        check_int_list(getattr(got, name), f"build_metadata(...).{name}")
    for name in LIST_FIELDS[:4] + INT_FIELDS + LIST_FIELDS[4:]:
        value = getattr(got, name)
        extra = ""
        if name == "positions" and value == [
            p - c for c, d in spans for p in range(c, d)
        ]:
            extra = "\n  看起来：每个请求的位置都从 0 开始了；应该从 cached_len 开始，前面的 token 在缓存里"
        elif name == "k_lens" and value == want["q_lens"]:
            extra = (
                "\n  看起来：k_lens 只算了新 token；key 还包括缓存里的 cached_len 个"
            )
        elif name == "last_indices" and value == want["cu_seqlens_q"][1:]:
            extra = "\n  看起来：差了 1——第 i 个请求的 token 是 [cu[i], cu[i+1])，最后一个是 cu[i+1] - 1"
        check_equal(value, want[name], f"build_metadata(spans).{name}", context + extra)


def check_mask(causal_mask, cached_len: int, device_len: int) -> None:
    call = f"causal_mask({cached_len}, {device_len})"
    got = causal_mask(cached_len, device_len)
    n = device_len - cached_len
    check_type(got, list, f"{call} 的返回值")
    check_equal(len(got), n, f"{call} 的行数（query 个数 = device_len - cached_len）")
    for i, row in enumerate(got):
        check_int_list(row, f"{call}[{i}]")
        check_equal(
            len(row), device_len, f"{call} 第 {i} 行的长度（key 个数 = device_len）"
        )
        for j, x in enumerate(row):
            check(x in (0, 1), f"{call} 第 {i} 行第 {j} 列应该是 0 或 1，你的是 {x}")
    want = ref_mask(cached_len, device_len)
    if got != want:
        top_left = [[1 if j <= i else 0 for j in range(device_len)] for i in range(n)]
        pic = "\n".join("    " + " ".join(map(str, row)) for row in want)
        yours = "\n".join("    " + " ".join(map(str, row)) for row in got)
        why = ""
        if got == top_left:
            why = "\n  看起来：这是左上角对齐的三角（tril / is_causal=True）；有缓存时要右下角对齐"
        check(False, f"{call} 不对。应该是：\n{pic}\n  你的是：\n{yours}{why}")


def random_batch(rng: random.Random) -> list[tuple[int, int]]:
    kind = rng.choice(["prefill", "cached", "decode", "mixed"])
    spans = []
    for _ in range(rng.randint(0, 10)):
        k = kind if kind != "mixed" else rng.choice(["prefill", "cached", "decode"])
        if k == "decode":
            device = rng.randint(1, 200)
            spans.append((device - 1, device))
        else:
            cached = 0 if k == "prefill" else rng.randint(1, 100)
            spans.append((cached, cached + rng.randint(1, 30)))
    return spans


# 坏的 (cached_len, device_len)：每个界一个就在边界上、一个远一些
BAD_SPANS = [
    lambda c, d, r: (-1, d),  # cached_len 是负数
    lambda c, d, r: (bad_int(r, -1), d),
    lambda c, d, r: (d, d),  # cached_len == device_len：没有 token 可算
    lambda c, d, r: (d + 1, d),  # cached_len > device_len
    lambda c, d, r: (d + r.randint(2, 1000), d),
]


def valid_span(r: random.Random) -> tuple[int, int]:
    kind = r.choice(["prefill", "cached", "decode"])
    if kind == "decode":
        device = r.randint(1, 200)
        return (device - 1, device)
    cached = 0 if kind == "prefill" else r.randint(1, 100)
    return (cached, cached + r.randint(1, 30))


def check_bad_arguments(mod, rng: random.Random) -> None:
    """坏参数：随机的批（3–5 个请求）里随机一个请求是坏的。每种坏法都查两次：一次坏的请求不是最后一个，
    一次不是第一个——只查第一个 / 最后一个请求（比如检查写在了循环外面）的代码过不去。"""

    def build(spans):  # 按位置传参
        return mod.build_metadata(spans)

    def mask(cached_len, device_len):
        return mod.causal_mask(cached_len, device_len)

    for _ in range(2):
        spans = [valid_span(rng) for _ in range(rng.randint(3, 5))]  # 不太长：判词里截短的批也看得清
        for bad in BAD_SPANS:

            def spoil(span, r, bad=bad):
                return bad(*span, r)

            not_last = lambda r, spoil=spoil: with_bad_item(r, spans[:-1], spoil) + spans[-1:]  # noqa: E731
            not_first = lambda r, spoil=spoil: spans[:1] + with_bad_item(r, spans[1:], spoil)  # noqa: E731
            for where in (not_last, not_first):
                probe_bad_arguments(build, dict(spans=spans), {"spans": where}, rng, name="build_metadata",
                                    tries=1)

        cached_len, device_len = valid_span(rng)
        good = dict(cached_len=cached_len, device_len=device_len)
        kinds = [
            ("cached_len", lambda r: -1), ("cached_len", lambda r: bad_int(r, -1)),  # 负数
            ("cached_len", lambda r: device_len),  # 没有 query
            ("cached_len", lambda r: device_len + 1), ("cached_len", lambda r: device_len + r.randint(2, 1000)),
            ("device_len", lambda r: cached_len), ("device_len", lambda r: bad_int(r, cached_len)),  # 不比 cached_len 大
        ]
        for key, spoil in kinds:
            probe_bad_arguments(mask, good, {key: spoil}, rng, name="causal_mask", tries=1)


def run(mod: object) -> None:
    build_metadata = require(mod, "build_metadata")
    causal_mask = require(mod, "causal_mask")

    # 题目里的例子和空批，再是一大批随机的
    check_batch(build_metadata, [(0, 3), (4, 6), (6, 7)])
    check_batch(build_metadata, [])
    rng = random.Random(SEED)
    for _ in range(200):
        check_batch(build_metadata, random_batch(rng))
    # 掩码：没有缓存（下三角）、题目里的例子、decode，再是随机的
    for cached_len, device_len in [(0, 1), (0, 4), (4, 6), (2, 5), (6, 7)]:
        check_mask(causal_mask, cached_len, device_len)
    for _ in range(200):
        device_len = rng.randint(1, 30)
        cached_len = rng.choice([0, device_len - 1, rng.randrange(device_len)])
        check_mask(causal_mask, cached_len, device_len)
    check_bad_arguments(mod, random.Random(SEED + 1))


if __name__ == "__main__":
    main(run)
