"""练习 004 的评测：在随机大小的批上和独立写的参考实现逐项比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check_equal, check_int_list, main, probe_bad_arguments, require, seed, with_bad_item

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


# ---------------------------------------------------------------------------
# 参考实现：换一种写法——先把整批展开成 (请求编号, 位置) 的列表，再从里面读出各项
# ---------------------------------------------------------------------------


def flat_tokens(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """拼接序列里的每个 token：(它属于第几个请求, 它在请求里的位置)。"""
    return [(i, pos) for i, (cached, device) in enumerate(spans) for pos in range(cached, device)]


def ref_positions(spans: list[tuple[int, int]]) -> list[int]:
    return [pos for _, pos in flat_tokens(spans)]


def ref_cu_seqlens(lengths: list[int]) -> list[int]:
    return [0, *itertools.accumulate(lengths)]


def ref_last_indices(spans: list[tuple[int, int]]) -> list[int]:
    tokens = flat_tokens(spans)
    # 下标 j 是某个请求的最后一个 token ⇔ 下一个 token 属于别的请求（或者没有下一个）
    return [j for j, (i, _) in enumerate(tokens) if j + 1 == len(tokens) or tokens[j + 1][0] != i]


# ---------------------------------------------------------------------------
# 随机的批
# ---------------------------------------------------------------------------


def random_batch(rng: random.Random) -> list[tuple[int, int]]:
    kind = rng.choice(["prefill", "prefill", "cached", "decode"])
    spans = []
    for _ in range(rng.randint(0, 12)):
        if kind == "decode":  # decode：每个请求只送一个 token
            device = rng.randint(1, 300)
            spans.append((device - 1, device))
        else:
            cached = 0 if kind == "prefill" else rng.randint(0, 200)
            spans.append((cached, cached + rng.randint(1, 40)))
    return spans


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def check_batch(mod: object, spans: list[tuple[int, int]]) -> None:
    context = f"spans = {spans}"
    ext = [d - c for c, d in spans]

    got = mod.extend_lens(spans)
    check_int_list(got, "extend_lens(spans) 的返回值")
    check_equal(got, ext, "extend_lens(spans)", context)

    got = mod.batch_positions(spans)
    check_int_list(got, "batch_positions(spans) 的返回值")
    check_equal(got, ref_positions(spans), "batch_positions(spans)", context)

    for name, lengths in (("extend_lens", ext), ("device_len", [d for _, d in spans])):
        got = mod.cu_seqlens(lengths)
        check_int_list(got, f"cu_seqlens({name}) 的返回值")
        check_equal(got, ref_cu_seqlens(lengths), f"cu_seqlens({lengths})", context)

    got = mod.last_token_indices(spans)
    check_int_list(got, "last_token_indices(spans) 的返回值")
    check_equal(got, ref_last_indices(spans), "last_token_indices(spans)", context)


def check_bad_spans(mod: object, rng: random.Random) -> None:
    """坏的请求在一批里随机的位置上（开头、中间、末尾），坏值就在边界上或者远一些。"""

    def call(spans):
        return mod.extend_lens(spans)

    for _ in range(2):
        spans = random_batch(rng)
        while len(spans) < 3:  # 至少三个请求：坏的那个才可能不在开头、也不在末尾
            spans.insert(rng.randint(0, len(spans)), (0, rng.randint(1, 9)))
        kinds = [
            lambda s, r: (s[1], s[1]),  # cached_len == device_len：没有 token 可算
            lambda s, r: (s[1] + r.choice([1, r.randint(2, 1000)]), s[1]),  # cached_len > device_len
            lambda s, r: (r.choice([-1, -r.randint(2, 1000)]), s[1]),  # cached_len 是负数
        ]
        for spoil in kinds:
            probe_bad_arguments(call, dict(spans=spans), dict(spans=lambda r: with_bad_item(r, spans, spoil)), rng,
                                name="extend_lens", tries=2)


def run(mod: object) -> None:
    for name in ("extend_lens", "batch_positions", "cu_seqlens", "last_token_indices"):
        require(mod, name)

    # 先用题目里的例子（出错时最好懂），再用空批
    check_batch(mod, [(0, 3), (2, 5)])
    check_batch(mod, [])

    rng = random.Random(SEED)
    check_bad_spans(mod, random.Random(SEED + 1))
    for _ in range(300):
        check_batch(mod, random_batch(rng))


if __name__ == "__main__":
    main(run)
