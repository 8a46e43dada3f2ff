"""练习 030 的评测：在随机队列上和参考实现逐步比较，并检查每一步不超预算、块首尾相接。

参考实现换了一种想法：把所有请求要算的位置按队列顺序首尾相接排成一条，再每 token_budget
个切一刀——先来先服务、只有最后一个被切开、切开的回到队首，合起来正是这样。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_raises, check_type, main, require, short, seed, bad_int, probe_bad_arguments, with_bad_item

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


def ref_plan(input_lens, token_budget, cached_lens=None):
    cached_lens = cached_lens or [0] * len(input_lens)
    stream = [(i, pos) for i, (n, c) in enumerate(zip(input_lens, cached_lens)) for pos in range(c, n)]
    steps = []
    for s in range(0, len(stream), token_budget):
        window, batch = stream[s: s + token_budget], []
        for i, pos in window:
            if batch and batch[-1][0] == i:
                batch[-1] = (i, batch[-1][1], pos + 1)
            else:
                batch.append((i, pos, pos + 1))
        steps.append(batch)
    return steps


def describe(input_lens, token_budget, cached_lens) -> str:
    extra = "" if cached_lens is None else f", cached_lens={short(cached_lens)}"
    return f"plan_prefill({short(input_lens)}, token_budget={token_budget}{extra})"


def check_shape(got, call: str) -> None:
    check_type(got, list, f"{call} 的返回值")
    for s, batch in enumerate(got):
        check_type(batch, list, f"第 {s + 1} 步的批")
        check(batch, f"{call}：第 {s + 1} 步的批是空的，没有要算的 token 就不该再有这一步")
        for item in batch:
            check(isinstance(item, tuple) and len(item) == 3 and all(
                isinstance(x, int) and not isinstance(x, bool) for x in item),
                f"{call}：第 {s + 1} 步里每一项应该是三个 int 组成的 tuple (请求下标, start, end)，"
                f"你给的是 {short(item)}")


def explain(got, want, input_lens, token_budget, cached_lens) -> str:
    """第一处不同，以及常见错误的猜测。"""
    cached = cached_lens or [0] * len(input_lens)
    for s, (g, w) in enumerate(zip(got, want)):
        if g != w:
            break
    else:
        s = min(len(got), len(want))
        g = got[s] if s < len(got) else None
        w = want[s] if s < len(want) else None
    lines = [f"第 {s + 1} 步不对：应该是 {short(w)}，你的是 {short(g)}"]
    used = [sum(e - b for _, b, e in batch) for batch in got]
    if any(u > token_budget for u in used):
        k = next(k for k, u in enumerate(used) if u > token_budget)
        lines.append(f"  你的第 {k + 1} 步算了 {used[k]} 个 token，超过了预算 {token_budget}："
                     "收到预算不够的请求时要切开它，只收预算够的那一段")
    starts = [b for batch in got for i, b, _ in batch if b == 0 and cached[i] > 0]
    if starts:
        lines.append("  看起来你没用 cached_lens：前 cached_lens[i] 个 token 已经在缓存里，从那里开始算")
    for k in range(len(got) - 1):
        last = got[k][-1] if got[k] else None
        if last and last[2] < input_lens[last[0]] and got[k + 1] and got[k + 1][0][0] != last[0]:
            lines.append(f"  第 {k + 1} 步切开了请求 {last[0]}，第 {k + 2} 步却没有从它开始："
                         "被切开的请求要回到队首")
            break
    for k, batch in enumerate(got):
        cut = [i for i, _, e in batch[:-1] if e < input_lens[i]]
        if cut:
            lines.append(f"  第 {k + 1} 步里请求 {cut[0]} 被切开了却不是最后一个：一批里只有最后一个请求可能被切开")
            break
    return "\n".join(lines)


def check_case(plan_prefill, input_lens, token_budget, cached_lens=None) -> None:
    call = describe(input_lens, token_budget, cached_lens)
    copies = (list(input_lens), None if cached_lens is None else list(cached_lens))
    args = (input_lens, token_budget) if cached_lens is None else (input_lens, token_budget, cached_lens)
    got = plan_prefill(*args)
    check_shape(got, call)
    check_equal(input_lens, copies[0], "传进来的 input_lens（不应该被改动）", call)
    if cached_lens is not None:
        check_equal(cached_lens, copies[1], "传进来的 cached_lens（不应该被改动）", call)
    want = ref_plan(input_lens, token_budget, cached_lens)
    if got != want:
        check(False, f"{call} 排出的计划不对。\n" + explain(got, want, input_lens, token_budget, cached_lens))


def check_example(plan_prefill) -> None:
    want = [[(0, 0, 5), (1, 2, 5)], [(1, 5, 12), (2, 0, 1)], [(2, 1, 3)]]
    assert ref_plan([5, 12, 3], 8, [0, 2, 0]) == want  # 题面的例子和参考实现一致
    check_case(plan_prefill, [5, 12, 3], 8, [0, 2, 0])
    check_equal(plan_prefill([], 4), [], "plan_prefill([], 4)（没有请求）")


def check_bad_arguments(plan_prefill) -> None:
    bad = [
        (([3, 4], 0), "token_budget 是 0"),
        (([3, 4], 8, [0]), "cached_lens 只有 1 个"),
        (([3, 0], 8), "有一个提示是空的"),
        (([3, 4], 8, [0, 4]), "cached_len 等于 input_len，一个 token 都不用算"),
        (([3, 4], 8, [-1, 0]), "cached_len 是负数"),
    ]
    for args, why in bad:
        check_raises(ValueError, plan_prefill, *args, what=f"plan_prefill{short(args)}（{why}）")
    # 坏的那一个在随机的位置、是随机的坏值：只查第一个请求、只认 0 或 -1 的代码过不去
    rng = random.Random(SEED + 1)
    inputs = [rng.randint(1, 20) for _ in range(rng.randint(3, 8))]
    cached = [rng.randrange(n) for n in inputs]

    def bad_cached(r):
        i = r.randrange(len(inputs))
        out = list(cached)
        out[i] = r.choice([bad_int(r, 0), inputs[i], inputs[i] + r.randint(1, 9)])  # 负数，或者一个都不用算
        return out

    def bad_inputs(r):  # 某个提示是空的（或者负的）；它的 cached_len 是 0，仍然不满足 0 <= cached < input
        i = r.randrange(len(inputs))
        return [bad_int(r, 1) if j == i else n for j, n in enumerate(inputs)]

    probe_bad_arguments(lambda input_lens, cached_lens, token_budget: plan_prefill(input_lens, token_budget, cached_lens),
                        dict(input_lens=inputs, cached_lens=[0] * len(inputs), token_budget=rng.randint(1, 16)),
                        dict(token_budget=lambda r: bad_int(r, 1), input_lens=bad_inputs,
                             cached_lens=lambda r: r.choice([bad_cached, lambda r: cached[: r.randrange(len(cached))],
                                                             lambda r: cached + [0] * r.randint(1, 3)])(r)),
                        rng, name="plan_prefill", tries=40)


def random_case(rng: random.Random):
    n = rng.randint(1, 9)
    long = rng.random() < 0.5
    input_lens = [rng.randint(1, 60 if long else 12) for _ in range(n)]
    cached = None if rng.random() < 0.4 else [rng.choice([0, rng.randrange(k)]) for k in input_lens]
    budget = rng.choice([1, 2, 3, rng.randint(1, 16), rng.randint(8, 64), 1000])
    return input_lens, budget, cached


def run(mod: object) -> None:
    plan_prefill = require(mod, "plan_prefill")
    check_example(plan_prefill)
    rng = random.Random(SEED)
    for _ in range(300):
        check_case(plan_prefill, *random_case(rng))
    check_bad_arguments(plan_prefill)


if __name__ == "__main__":
    main(run)
