"""练习 032 的评测：随机的场景和计时函数，和参考实现比较每一步、最长间隔和 TTFT。

参考实现先只排步骤（不管时间），再按步骤累加时间——和“边排边计时”是两种写法。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_raises, check_type, main, require, short, seed, bad_int, probe_bad_arguments, with_bad_item

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


def ref_steps(decode_left, prompt_len, budget, between, *, variant: str = ""):
    """参考实现只排步骤、不管时间。variant 只用来在出错时猜你错在哪里。"""
    left, pos, chunk_before, steps = list(decode_left), 0, False, []
    while pos < prompt_len or any(left):
        running = sum(1 for n in left if n > 0)
        insert = between and chunk_before and running
        if variant == "decode_first":  # 常见的错：有请求在 decode 就先 decode
            insert = between and running and (not steps or steps[-1][0] == "prefill")
        elif variant == "no_running_check":  # 常见的错：没人在 decode 也插一步空的 decode
            insert = between and chunk_before
        if pos < prompt_len and not insert:
            end = min(pos + budget, prompt_len)
            steps.append(("prefill", pos, end))
            pos, chunk_before = end, end < prompt_len
        else:
            steps.append(("decode", running))
            left = [n - 1 if n > 0 else 0 for n in left]
            chunk_before = False
    return steps


def ref_times(steps, decode_left, prompt_len, prefill_ms, decode_ms):
    now, ttft, tokens = 0.0, 0.0, [[0.0] for _ in decode_left]
    left = list(decode_left)
    for step in steps:
        if step[0] == "prefill":
            now += prefill_ms(step[1], step[2])
            if step[2] == prompt_len:
                ttft = now
        else:
            now += decode_ms(step[1])
            for i, n in enumerate(left):
                if n > 0:
                    tokens[i].append(now)
                    left[i] -= 1
    gaps = [b - a for t in tokens for a, b in zip(t, t[1:])]
    return max(gaps, default=0.0), ttft


class Timer:
    """一组随机的计时函数，并记下被调用的参数（用来检查是不是按块的真实位置计时）。"""

    def __init__(self, rng: random.Random) -> None:
        self.base = rng.uniform(0.5, 3.0)
        self.per_token = rng.uniform(0.01, 0.2)
        self.per_key = rng.uniform(0.0, 0.01)  # 后面的块要看更多 key，更慢
        self.dec_base = rng.uniform(0.2, 2.0)
        self.dec_per_req = rng.uniform(0.0, 0.5)
        self.calls: list[tuple] = []

    def prefill_ms(self, s: int, e: int) -> float:
        self.calls.append(("prefill", s, e))
        return self.base + self.per_token * (e - s) + self.per_key * (e - s) * (s + e) / 2

    def decode_ms(self, n: int) -> float:
        self.calls.append(("decode", n))
        return self.dec_base + self.dec_per_req * n


def describe(decode_left, prompt_len, budget, between) -> str:
    return (f"simulate(decode_left={short(decode_left)}, prompt_len={prompt_len}, token_budget={budget}, "
            f"decode_between_chunks={between}, …)")


def explain_steps(got, want, decode_left, prompt_len, budget, between) -> str:
    k = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
    lines = [f"  第一处不同在第 {k + 1} 步：应该是 {want[k] if k < len(want) else '（没有这一步）'}，"
             f"你的是 {got[k] if k < len(got) else '（没有这一步）'}",
             f"  应该是：{short(want, 300)}", f"  你的是：{short(got, 300)}"]
    guesses = [
        (dict(between=not between), "你的步骤像是把 decode_between_chunks 当成了 "
         f"{not between}：它为真时，一块没算完整段提示、又有请求在 decode，下一步先 decode；为假时 prefill 优先"),
        (dict(between=between, variant="decode_first"), "不是 decode 优先：只有上一步是“没算完整段提示的一块”时才插一步 decode"),
        (dict(between=between, variant="no_running_check"), "没有请求在 decode 时不插 decode 步（不会有一步空的 decode）"),
    ]
    for kwargs, why in guesses:
        if ref_steps(decode_left, prompt_len, budget, **kwargs) == got:
            lines.append("  看起来：" + why)
            break
    return "\n".join(lines)


def check_case(simulate, decode_left, prompt_len, budget, between, timer: Timer) -> None:
    call = describe(decode_left, prompt_len, budget, between)
    copy = list(decode_left)
    result = simulate(decode_left, prompt_len, budget, between, timer.prefill_ms, timer.decode_ms)
    check(isinstance(result, tuple) and len(result) == 3,
          f"{call} 应该返回 (steps, max_gap, ttft) 三项组成的 tuple，你返回的是 {short(result)}")
    steps, max_gap, ttft = result
    check_type(steps, list, f"{call} 返回的 steps")
    for item in steps:
        check(isinstance(item, tuple) and item and item[0] in ("prefill", "decode"),
              f"{call}：steps 的每一项应该是 (\"prefill\", s, e) 或 (\"decode\", 请求数)，你给的是 {short(item)}")
    check(decode_left == copy, f"{call} 改动了传进来的 decode_left")
    want = ref_steps(decode_left, prompt_len, budget, between)
    if steps != want:
        check(False, f"{call} 排出的步骤不对。\n" + explain_steps(steps, want, decode_left, prompt_len, budget, between))
    want_calls = [s if s[0] == "prefill" else ("decode", s[1]) for s in want]
    if timer.calls != want_calls:
        bad = next((c for c, w in zip(timer.calls, want_calls) if c != w), None)
        why = ""
        if bad and bad[0] == "prefill":
            why = f"\n  你用 prefill_ms{bad[1:]} 计时，应该按这一块在提示里的真实位置 prefill_ms(s, e) 计时"
        check(False, f"{call}：计时函数的调用和步骤对不上（每一步恰好调用一次，参数就是这一步）。\n"
                     f"  应该依次是：{short(want_calls, 300)}\n  你的调用：{short(timer.calls, 300)}{why}")
    want_gap, want_ttft = ref_times(want, decode_left, prompt_len, timer.prefill_ms, timer.decode_ms)
    for name, got, exp in (("max_gap", max_gap, want_gap), ("ttft", ttft, want_ttft)):
        check(isinstance(got, (int, float)) and not isinstance(got, bool),
              f"{call} 返回的 {name} 应该是数，你给的是 {short(got)}")
        if not math.isclose(got, exp, rel_tol=1e-9, abs_tol=1e-9):
            hint = ""
            if name == "max_gap":
                hint = ("\n  间隔从时刻 0 算起，token 在它那一步结束时到达；"
                        "最长间隔要看所有请求、所有相邻的两个 token")
            else:
                hint = "\n  TTFT 是算完最后一块的那一步结束的时刻"
            check(False, f"{call} 的 {name} 不对：应该是 {exp:.6g}，你的是 {got:.6g}{hint}")


def check_example(simulate) -> None:
    for between, steps, gap, ttft in (
        (False, [("prefill", 0, 4), ("prefill", 4, 8), ("prefill", 8, 10), ("decode", 1), ("decode", 1),
                 ("decode", 1)], 11.0, 10.0),
        (True, [("prefill", 0, 4), ("decode", 1), ("prefill", 4, 8), ("decode", 1), ("prefill", 8, 10),
                ("decode", 1)], 5.0, 12.0),
    ):
        got = simulate([3], 10, 4, between, lambda s, e: float(e - s), lambda n: 1.0)
        want = (steps, gap, ttft)
        assert ref_steps([3], 10, 4, between) == steps  # 题面的例子和参考实现一致
        if got != want:
            call = f"题目里的例子（decode_between_chunks={between}）"
            if isinstance(got, tuple) and len(got) == 3 and got[0] != steps:
                check(False, f"{call} 的步骤不对。\n" + explain_steps(got[0], steps, [3], 10, 4, between))
            hint = ""
            if isinstance(got, tuple) and len(got) == 3 and got[1] != gap:
                hint = "\n  最长间隔不对：间隔从时刻 0 算起，token 在它那一步结束时到达"
            check(False, f"{call}：应该返回 {short(want, 300)}，你返回的是 {short(got, 300)}{hint}")


def check_bad_arguments(simulate) -> None:
    def never(*args):
        check(False, "参数不对时应该在调用计时函数之前就抛 ValueError")

    for args, why in (
        (([2], 0, 4, False), "prompt_len 是 0"),
        (([2], 8, 0, True), "token_budget 是 0"),
        (([2, 0], 8, 4, False), "有一个 decode 请求还剩 0 步"),
    ):
        check_raises(ValueError, simulate, *args, never, never, what=f"simulate{short(args)}（{why}）")
    # 坏的那一个在随机的位置、是随机的坏值：只查第一个 decode 请求、只认 0 的代码过不去
    rng = random.Random(SEED + 1)
    left = [rng.randint(1, 9) for _ in range(rng.randint(3, 8))]
    probe_bad_arguments(
        lambda decode_left, prompt_len, token_budget, decode_between_chunks:
            simulate(decode_left, prompt_len, token_budget, decode_between_chunks, never, never),
        dict(decode_left=left, prompt_len=rng.randint(1, 64), token_budget=rng.randint(1, 16),
             decode_between_chunks=rng.random() < 0.5),
        dict(prompt_len=lambda r: bad_int(r, 1), token_budget=lambda r: bad_int(r, 1),
             decode_left=lambda r: with_bad_item(r, left, lambda n, r: bad_int(r, 1))),
        rng, name="simulate", tries=40)


def run(mod: object) -> None:
    simulate = require(mod, "simulate")
    check_example(simulate)
    rng = random.Random(SEED)
    for _ in range(300):
        d = rng.choice([0, 1, 2, rng.randint(1, 6)])
        decode_left = [rng.choice([1, rng.randint(1, 12), rng.randint(5, 40)]) for _ in range(d)]
        prompt_len = rng.choice([1, rng.randint(1, 30), rng.randint(20, 200)])
        budget = rng.choice([1, rng.randint(1, 16), rng.randint(8, 64), 500])
        check_case(simulate, decode_left, prompt_len, budget, rng.random() < 0.5, Timer(rng))
    check_bad_arguments(simulate)


if __name__ == "__main__":
    main(run)
