"""练习 020 的评测：确定性的假模型检查每一次调用（谁在批里、顺序、送的 token、start），
输出和 batch_sizes 再和逐个请求单独模拟的参考实现比较。

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
    short,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
MAX_CALLS = 2000  # 假模型被调用这么多次还没停，多半是循环停不下来


# ---------------------------------------------------------------------------
# 假模型的“大脑”：下一个 token 是（请求、整段序列）的确定性函数。
# 不用 hash()：浏览器里的 Python 也算出一样的数。eos 有一定概率被选中，生成常常会提前停。
# ---------------------------------------------------------------------------


def mix(seq: list[int], salt: int) -> int:
    h = salt
    for t in seq:
        h = (h * 1_000_003 + t + 1) % (2**61 - 1)
    return h


def next_token(seq: list[int], salt: int, vocab: int, eos_id: int | None) -> int:
    rng = random.Random(mix(seq, salt))
    if eos_id is not None and rng.random() < 0.2:
        return eos_id
    return rng.randrange(vocab)


class Setup:
    """一组输入：提示词、max_tokens、eos、ignore_eos，以及每个请求自己的 salt。"""

    def __init__(self, prompts, max_tokens, eos_id, ignore_eos, vocab, salt) -> None:
        self.prompts, self.max_tokens = prompts, max_tokens
        self.eos_id, self.ignore_eos, self.vocab, self.salt = (
            eos_id,
            ignore_eos,
            vocab,
            salt,
        )

    def token(self, rid: int, seq: list[int]) -> int:
        return next_token(seq, self.salt + rid, self.vocab, self.eos_id)

    def done(self, rid: int, out: list[int]) -> str:
        """请求结束的原因；还没结束时返回空字符串。"""
        if len(out) >= self.max_tokens[rid]:
            return f"已经生成了 max_tokens={self.max_tokens[rid]} 个"
        ignore = bool(self.ignore_eos and self.ignore_eos[rid])
        if out and self.eos_id is not None and not ignore and out[-1] == self.eos_id:
            return f"已经生成出了 eos_id={self.eos_id}"
        return ""

    def describe(self) -> str:
        parts = [
            f"prompts={short(self.prompts, 200)}",
            f"max_tokens={self.max_tokens}",
            f"eos_id={self.eos_id}",
        ]
        if self.ignore_eos is not None:
            parts.append(f"ignore_eos={self.ignore_eos}")
        return "generate_batch(" + ", ".join(parts) + ")"


# ---------------------------------------------------------------------------
# 参考实现：每个请求单独从头模拟，不管批；batch_sizes 再从输出长度数出来
# ---------------------------------------------------------------------------


def ref_generate(setup: Setup) -> tuple[list[list[int]], list[int]]:
    outputs = []
    for rid, prompt in enumerate(setup.prompts):
        seq, out = list(prompt), []
        while not setup.done(rid, out):
            token = setup.token(rid, seq)
            out.append(token)
            seq.append(token)
        outputs.append(out)
    steps = max((len(o) for o in outputs), default=0)
    # 第 s 步（从 0 数）的批里，是输出至少有 s + 1 个 token 的那些请求
    return outputs, [sum(1 for o in outputs if len(o) > s) for s in range(steps)]


# ---------------------------------------------------------------------------
# 假模型：像引擎一样替每个请求记着 KV 缓存，检查每一次调用
# ---------------------------------------------------------------------------


def item_text(item) -> str:
    rid, tokens, start = item
    return f"({rid}, {short(list(tokens), 60)}, {start})"


class FakeModel:
    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.context = setup.describe()
        self.cache: dict[int, list[int]] = {}
        self.generated: dict[int, list[int]] = {
            i: [] for i in range(len(setup.prompts))
        }
        self.calls = 0

    def __call__(self, batch):
        self.calls += 1
        k = self.calls
        where = f"{self.context}\n  第 {k} 次调用 step"
        check(
            k <= MAX_CALLS,
            f"{self.context}：step 已经被调用了 {MAX_CALLS} 次，循环是不是停不下来？",
        )
        check_type(batch, list, f"第 {k} 次调用 step 时的 batch")
        check(
            batch, f"{where} 时 batch 是空的：一个请求都不剩时就该停下，不要再调用 step"
        )
        items = []
        for j, item in enumerate(batch):
            check(
                isinstance(item, (tuple, list)) and len(item) == 3,
                f"{where}：batch 的第 {j} 项应该是 (req_id, tokens, start)，你给的是 {short(item)}",
            )
            rid, tokens, start = item
            check_type(rid, int, f"第 {k} 次调用 step 时第 {j} 项的 req_id")
            check_int_list(tokens, f"第 {k} 次调用 step 时第 {j} 项的 tokens")
            check_type(start, int, f"第 {k} 次调用 step 时第 {j} 项的 start")
            items.append((rid, list(tokens), start))
        rids = [rid for rid, _, _ in items]
        got_text = (
            "["
            + ", ".join(item_text(it) for it in items[:6])
            + (", …" if len(items) > 6 else "")
            + "]"
        )

        if k == 1:
            want = [(i, list(p), 0) for i, p in enumerate(self.setup.prompts)]
            if items != want:
                want_text = (
                    "["
                    + ", ".join(item_text(it) for it in want[:6])
                    + (", …" if len(want) > 6 else "")
                    + "]"
                )
                check(
                    False,
                    f"{where}：第一次调用应该是所有请求的 prefill，按 req_id 从小到大，每项 (i, prompts[i], 0)\n"
                    f"  应该是：{want_text}\n  你的是：{got_text}",
                )
        else:
            check(
                len(set(rids)) == len(rids),
                f"{where}：同一个请求在一个批里出现了不止一次：req_id = {rids}",
            )
            for rid in rids:
                check(
                    0 <= rid < len(self.setup.prompts),
                    f"{where}：没有 req_id = {rid} 这个请求（一共 {len(self.setup.prompts)} 个）",
                )
                reason = self.setup.done(rid, self.generated[rid])
                check(
                    not reason,
                    f"{where}：请求 {rid} {reason}，已经结束了，不该再出现在批里"
                    f"（它的输出：{self.generated[rid]}）\n  你的 batch：{got_text}",
                )
            running = [
                i for i in self.generated if not self.setup.done(i, self.generated[i])
            ]
            missing = [i for i in running if i not in rids]
            if missing:
                rid = missing[0]
                out = self.generated[rid]
                why = ""
                if self.setup.eos_id is not None and out[-1] == self.setup.eos_id:
                    why = f"\n  它的 ignore_eos 是 True：生成出 eos_id={self.setup.eos_id} 也不停，要一直生成到 max_tokens"
                check(
                    False,
                    f"{where}：请求 {rid} 还没结束（已生成 {len(out)} 个：{short(out)}，max_tokens={self.setup.max_tokens[rid]}），"
                    f"这一步却不在批里：每一步都要带上所有还在跑的请求{why}\n  你的 batch：{got_text}",
                )
            check(
                rids == sorted(rids),
                f"{where}：批里的请求要按 req_id 从小到大排，你的是 {rids}",
            )
            for rid, tokens, start in items:
                last = self.generated[rid][-1]
                want_start = len(self.setup.prompts[rid]) + len(self.generated[rid]) - 1
                if (tokens, start) != ([last], want_start):
                    lines = [
                        (
                            f"{where}：请求 {rid} 应该是 ({rid}, [{last}], {want_start})——只送上一步选出的 {last}，"
                            f"它的位置是 {want_start}（前面 {want_start} 个 token 都已经在缓存里了）"
                        ),
                        f"  你的是 {item_text((rid, tokens, start))}",
                    ]
                    if start == 0 and len(tokens) > 1:
                        lines.append("  你把整段序列从头又送了一遍：KV 缓存白存了")
                    elif tokens == [last]:
                        lines.append(
                            "  token 对了，start 不对：start = len(prompts[i]) + len(outputs[i]) - 1"
                        )
                    check(False, "\n".join(lines))

        result = []
        for rid, tokens, start in items:
            cached = self.cache.get(rid, [])
            self.cache[rid] = cached[:start] + tokens
            token = self.setup.token(rid, self.cache[rid])
            self.generated[rid].append(token)
            result.append(token)
        return result


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def check_run(generate_batch, setup: Setup) -> None:
    model = FakeModel(setup)
    context = setup.describe()
    prompts_copy = [list(p) for p in setup.prompts]
    max_copy = list(setup.max_tokens)
    ignore_copy = None if setup.ignore_eos is None else list(setup.ignore_eos)
    kwargs = {"eos_id": setup.eos_id}
    if setup.ignore_eos is not None:
        kwargs["ignore_eos"] = setup.ignore_eos
    result = generate_batch(setup.prompts, setup.max_tokens, model, **kwargs)

    check(
        isinstance(result, tuple) and len(result) == 2,
        f"{context} 应该返回 (outputs, batch_sizes) 两项组成的 tuple，你返回的是 {short(result)}",
    )
    outputs, batch_sizes = result
    check_type(outputs, list, f"{context} 返回的 outputs")
    for i, out in enumerate(outputs):
        check_int_list(out, f"outputs[{i}]")
    check_int_list(batch_sizes, f"{context} 返回的 batch_sizes")
    want_outputs, want_sizes = ref_generate(setup)
    check_equal(
        len(outputs), len(want_outputs), "outputs 的长度（每个请求一项）", context
    )
    for i, (got, want) in enumerate(zip(outputs, want_outputs)):
        hint = ""
        eos = setup.eos_id
        ignore = bool(setup.ignore_eos and setup.ignore_eos[i])
        if eos is not None and want and want[-1] == eos and got == want[:-1]:
            hint = f"\n  看起来：生成出 eos_id={eos} 时要把它也放进输出，再结束"
        elif ignore and eos in got and got == want[: len(got)]:
            hint = f"\n  看起来：请求 {i} 的 ignore_eos 是 True，生成出 eos_id 也不停，要一直生成到 max_tokens"
        check_equal(
            got, want, f"outputs[{i}]（请求 {i} 新生成的 token）", context + hint
        )
    check_equal(
        batch_sizes, want_sizes, "batch_sizes（每次调用 step 时批的大小）", context
    )
    check_equal(model.calls, len(want_sizes), "调用 step 的次数", context)
    check_equal(
        setup.prompts, prompts_copy, "调用者传进来的 prompts（不应该被改动）", context
    )
    check_equal(
        setup.max_tokens, max_copy, "调用者传进来的 max_tokens（不应该被改动）", context
    )
    if ignore_copy is not None:
        check_equal(
            setup.ignore_eos,
            ignore_copy,
            "调用者传进来的 ignore_eos（不应该被改动）",
            context,
        )


class ScriptedModel:
    """题目里的例子：按调用顺序给出写好的 token。"""

    def __init__(self) -> None:
        self.script = [
            ([(0, [11, 12, 13], 0), (1, [21], 0), (2, [31, 32], 0)], [5, 3, 9]),
            ([(0, [5], 3), (1, [3], 1), (2, [9], 2)], [7, 0, 4]),
            ([(2, [4], 3)], [6]),
        ]
        self.calls = 0

    def __call__(self, batch):
        check(
            self.calls < len(self.script),
            f"题目里的例子只有 {len(self.script)} 步，你调用了第 {self.calls + 1} 次 step：{short(batch)}",
        )
        want, tokens = self.script[self.calls]
        self.calls += 1
        got = [(rid, list(t), s) for rid, t, s in batch]
        check_equal(got, want, f"题目里的例子：第 {self.calls} 次调用 step 的 batch")
        return list(tokens)


def check_example(generate_batch) -> None:
    model = ScriptedModel()
    result = generate_batch([[11, 12, 13], [21], [31, 32]], [2, 4, 3], model, eos_id=0)
    check(
        isinstance(result, tuple) and len(result) == 2,
        f"generate_batch 应该返回 (outputs, batch_sizes) 两项组成的 tuple，你返回的是 {short(result)}",
    )
    outputs, batch_sizes = result
    check_equal(outputs, [[5, 7], [3, 0], [9, 4, 6]], "题目里的例子：outputs")
    check_equal(batch_sizes, [3, 3, 1], "题目里的例子：batch_sizes")


def never_called(batch):
    check(
        False,
        f"参数不对时应该在调用 step 之前就抛 ValueError，你却调用了 step({short(batch)})",
    )


def check_bad_arguments(generate_batch, rng: random.Random) -> None:
    """坏参数：请求个数、提示词、max_tokens 都随机；坏的那个元素在随机的位置上（开头、中间、末尾），
    列表长度少几个或者多几个。每一种都要在调用 step 之前抛 ValueError。"""

    def other_length(r, items, make):
        """items 的长度变一变：少几个（可能一个不剩）或者多几个。"""
        n = len(items)
        if r.random() < 0.5:
            return list(items[: r.randrange(n)])
        return list(items) + [make(r) for _ in range(r.choice([1, r.randint(2, 50)]))]

    def call(prompts, max_tokens, step, eos_id, ignore_eos):  # 前三个按位置传参，和题目里的调用一样
        return generate_batch(prompts, max_tokens, step, eos_id=eos_id, ignore_eos=ignore_eos)

    for _ in range(3):
        n = rng.randint(3, 12)
        prompts = [[rng.randrange(1000) for _ in range(rng.randint(1, 10))] for _ in range(n)]
        max_tokens = [rng.randint(1, 6) for _ in range(n)]
        ignore_eos = [rng.random() < 0.5 for _ in range(n)]
        good = dict(prompts=prompts, max_tokens=max_tokens, step=never_called, eos_id=rng.randrange(1000),
                    ignore_eos=ignore_eos)
        kinds = dict(
            # 某个提示词是空的
            prompts=lambda r: with_bad_item(r, prompts, lambda p, r: []),
            # 某个 max_tokens 是 0 或负数
            max_tokens=lambda r: with_bad_item(r, max_tokens, lambda m, r: bad_int(r, 1)),
        )
        lengths = dict(
            prompts=lambda r: other_length(r, prompts, lambda r: [r.randrange(1000)]),
            max_tokens=lambda r: other_length(r, max_tokens, lambda r: r.randint(1, 6)),
            ignore_eos=lambda r: other_length(r, ignore_eos, lambda r: r.random() < 0.5),
        )
        for bad in (kinds, lengths):
            for key in bad:
                probe_bad_arguments(call, good, {key: bad[key]}, rng, name="generate_batch", tries=2)
    got = generate_batch([], [], never_called, eos_id=3)
    check_equal(got, ([], []), "generate_batch([], [], step)（没有请求）的返回值")


def random_setup(rng: random.Random) -> Setup:
    n = rng.randint(1, 8)
    vocab = rng.randint(4, 40)
    prompts = [
        [rng.randrange(vocab) for _ in range(rng.randint(1, 12))] for _ in range(n)
    ]
    max_tokens = [rng.choice([1, rng.randint(1, 20)]) for _ in range(n)]
    eos_id = rng.choice([None, rng.randrange(vocab), rng.randrange(vocab)])
    ignore_eos = None if rng.random() < 0.5 else [rng.random() < 0.3 for _ in range(n)]
    return Setup(prompts, max_tokens, eos_id, ignore_eos, vocab, rng.randrange(2**32))


def run(mod: object) -> None:
    generate_batch = require(mod, "generate_batch")
    check_example(generate_batch)
    rng = random.Random(SEED)
    for _ in range(250):
        check_run(generate_batch, random_setup(rng))
    check_bad_arguments(generate_batch, random.Random(SEED + 1))


if __name__ == "__main__":
    main(run)
