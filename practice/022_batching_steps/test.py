"""练习 022 的评测：题目里的例子、本章演示的 8 个请求，再在几百组随机请求上和独立写的参考实现逐步比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from collections import deque
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parent.parent)
)  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_raises, check_type, main, require, short, seed, bad_int, probe_bad_arguments, with_bad_item

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现

# ---------------------------------------------------------------------------
# 参考实现：队列是 deque，在跑的请求记“还剩几个 token”，每步减一，减到 0 就离开
# ---------------------------------------------------------------------------


def ref_simulate(requests, max_running, continuous):
    waiting = deque(requests)
    slots: list[list[int]] = []  # [uid, 还剩几个 token]，按接纳的先后
    steps = []
    while waiting or slots:
        room = max_running - len(slots)
        if waiting and room > 0 and (continuous or not slots):
            new = [waiting.popleft() for _ in range(min(room, len(waiting)))]
            steps.append(("prefill", [uid for uid, _ in new]))
            slots.extend([uid, max_tokens - 1] for uid, max_tokens in new)
        else:
            steps.append(("decode", [uid for uid, _ in slots]))
            for slot in slots:
                slot[1] -= 1
        slots = [slot for slot in slots if slot[1] > 0]
    return steps


def policy_name(continuous: bool) -> str:
    return "连续批处理" if continuous else "静态批处理"


def describe(requests, max_running, continuous) -> str:
    return f"simulate({short(requests, 200)}, max_running={max_running}, continuous={continuous})（{policy_name(continuous)}）"


def check_shape(steps, context: str) -> list[tuple[str, list[int]]]:
    check_type(steps, list, f"{context} 的返回值")
    out = []
    for i, step in enumerate(steps):
        check(
            isinstance(step, (tuple, list)) and len(step) == 2,
            f"{context}：第 {i + 1} 步应该是 (阶段, uid 列表)，你给的是 {short(step)}",
        )
        phase, uids = step
        check(
            phase in ("prefill", "decode"),
            f"{context}：第 {i + 1} 步的阶段应该是 \"prefill\" 或 \"decode\"，你给的是 {short(phase)}",
        )
        check_type(uids, list, f"{context} 第 {i + 1} 步的 uid 列表")
        for uid in uids:
            check_type(uid, int, f"{context} 第 {i + 1} 步里的 uid")
        out.append((phase, list(uids)))
    return out


def explain(got, want, requests, max_running, continuous) -> str:
    """找出第一处不同的那一步，猜一猜错在哪。"""
    for i, (g, w) in enumerate(zip(got, want)):
        if g == w:
            continue
        lines = [f"第 {i + 1} 步应该是 {w}，你的是 {g}"]
        if i > 0:
            lines.append(f"  前 {i} 步都对：{short(want[:i], 300)}")
        (gp, gu), (wp, wu) = g, w
        if not continuous and gp == "prefill" and wp == "decode":
            lines.append("  看起来：静态批处理在还有请求在跑的时候接纳了新请求；它要等这一批全部结束")
        elif continuous and gp == "decode" and wp == "prefill":
            lines.append("  看起来：有空位、队列里也有请求，这一步应该先 prefill（prefill 优先）")
        elif gp == wp == "prefill" and set(wu) < set(gu):
            lines.append("  看起来：prefill 这一步把在跑的请求也放进来了；这一步只有刚接纳的请求")
        elif gp == wp == "prefill":
            lines.append("  先来先服务：从队首按到达的顺序接纳，直到空位用完")
        elif gp == wp == "decode" and sorted(gu) == sorted(wu):
            lines.append("  decode 批里的请求要按接纳的先后排（不是按 uid 排序，也不是 set 的顺序）")
        elif gp == wp == "decode":
            lines.append("  decode 批是全部在跑的请求：生成到 max_tokens 个就离开，还没满的都要在")
        return "\n".join(lines)
    if len(got) != len(want):
        return f"前 {min(len(got), len(want))} 步都对，但一共应该有 {len(want)} 步，你的有 {len(got)} 步"
    return ""


def check_case(simulate, requests, max_running, continuous) -> None:
    context = describe(requests, max_running, continuous)
    copy = [tuple(r) for r in requests]
    got = check_shape(simulate(requests, max_running, continuous), context)
    check_equal([tuple(r) for r in requests], copy, "传进来的 requests（不应该被改动）", context)
    want = ref_simulate(copy, max_running, continuous)
    if got != want:
        check(False, f"{context} 不对。\n  " + explain(got, want, copy, max_running, continuous))


def check_examples(simulate) -> None:
    example = [(7, 3), (2, 1), (5, 2)]
    check_case(simulate, example, 2, True)
    check_case(simulate, example, 2, False)
    chapter = list(enumerate([64, 8, 40, 4, 56, 16, 32, 24]))
    for continuous, n in ((True, 68), (False, 120)):
        steps = simulate(chapter, 4, continuous)
        check_type(steps, list, "simulate 的返回值")
        check_equal(len(steps), n, f"本章演示的 8 个请求用{policy_name(continuous)}的步数")
    check_equal(simulate([], 3, True), [], "simulate([], 3, True)（没有请求）")


def check_bad_arguments(simulate) -> None:
    cases = [
        (([(0, 4)], 0, True), "max_running 是 0"),
        (([(0, 4), (1, 0)], 2, True), "有一个 max_tokens 是 0"),
        (([(0, 4), (1, -3)], 2, False), "有一个 max_tokens 是负数"),
        (([(3, 4), (5, 2), (3, 1)], 2, True), "uid 3 出现了两次"),
    ]
    for args, why in cases:
        check_raises(ValueError, simulate, *args, what=f"simulate{short(args)}（{why}）")
    # 坏的那一个在随机的位置、是随机的坏值：只查第一个 / 最后一个请求、只认 0 的代码过不去
    rng = random.Random(SEED + 1)
    uids = rng.sample(range(100), rng.randint(3, 8))
    requests = [(u, rng.randint(1, 9)) for u in uids]

    def bad_tokens(r):
        return with_bad_item(r, requests, lambda req, r: (req[0], bad_int(r, 1)))

    def repeated_uid(r):
        i, j = sorted(r.sample(range(len(requests)), 2))
        out = list(requests)
        out[j] = (requests[i][0], requests[j][1])
        return out

    probe_bad_arguments(lambda requests, max_running, continuous: simulate(requests, max_running, continuous),
                        dict(requests=requests, max_running=rng.randint(1, 4), continuous=rng.random() < 0.5),
                        dict(max_running=lambda r: bad_int(r, 1), requests=lambda r: r.choice([bad_tokens, repeated_uid])(r)),
                        rng, name="simulate", tries=40)


def random_case(rng: random.Random):
    n = rng.randint(1, 12)
    uids = rng.sample(range(100), n)  # 到达的顺序和 uid 的大小无关
    requests = [(uid, rng.choice([1, rng.randint(1, 6), rng.randint(1, 30)])) for uid in uids]
    return requests, rng.randint(1, 6)


def run(mod: object) -> None:
    simulate = require(mod, "simulate")
    check_examples(simulate)
    rng = random.Random(SEED)
    for _ in range(300):
        requests, max_running = random_case(rng)
        for continuous in (True, False):
            check_case(simulate, requests, max_running, continuous)
    check_bad_arguments(simulate)


if __name__ == "__main__":
    main(run)
