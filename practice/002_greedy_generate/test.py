"""练习 002 的评测：用一个确定性的假模型跑贪心生成，核对返回值，也核对每一次调用 step 的参数。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_int_list, check_type, main, require, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
MAX_CALLS = 1000  # 假模型被调用这么多次还没停，多半是循环停不下来


# ---------------------------------------------------------------------------
# 假模型：logits 是“整段序列”的确定性函数（不用 hash()，浏览器里的 Python 也算出一样的数）。
# 取值只有十几种，所以并列最大很常见；eos 有一定概率被抬成最大，生成常常会提前停下。
# ---------------------------------------------------------------------------


def mix(seq: list[int], salt: int) -> int:
    h = salt
    for t in seq:
        h = (h * 1_000_003 + t + 1) % (2**61 - 1)
    return h


def model_logits(seq: list[int], vocab: int, eos_id: int | None, salt: int) -> list[float]:
    rng = random.Random(mix(seq, salt))
    logits = [rng.randrange(-6, 7) / 2 for _ in range(vocab)]
    if eos_id is not None and rng.random() < 0.15:
        logits[eos_id] = max(logits) + 1.0
    return logits


class FakeModel:
    """像带 KV 缓存的引擎一样工作：记着缓存里的 token，新 token 接在第 start 个位置之后。"""

    def __init__(self, vocab: int, eos_id: int | None, salt: int, context: str) -> None:
        self.vocab, self.eos_id, self.salt, self.context = vocab, eos_id, salt, context
        self.cache: list[int] = []
        self.calls: list[tuple[list[int], int]] = []

    def __call__(self, tokens: list[int], start: int) -> list[float]:
        k = len(self.calls) + 1
        where = f"{self.context}：第 {k} 次调用 step"
        check(
            k <= MAX_CALLS,
            f"{self.context}：step 已经被调用了 {MAX_CALLS} 次，循环是不是停不下来？",
        )
        check_int_list(tokens, f"{where} 时的 tokens")
        check_type(start, int, f"{where} 时的 start")
        self.calls.append((list(tokens), start))
        check(tokens, f"{where} 时 tokens 是空的：至少要送 1 个 token，才有 logits 可取")
        check(
            0 <= start <= len(self.cache),
            f"{self.context}：第 {k} 次调用 {call_text(tokens, start)}，可缓存里只有 {len(self.cache)} 个 token，"
            f"start 必须在 0…{len(self.cache)} 之间（新 token 紧接在缓存里的 token 后面）",
        )
        self.cache = self.cache[:start] + list(tokens)
        return model_logits(self.cache, self.vocab, self.eos_id, self.salt)

    def logits_of(self, seq: list[int]) -> list[float]:
        return model_logits(seq, self.vocab, self.eos_id, self.salt)


# ---------------------------------------------------------------------------
# 参考实现：不管缓存，每一步直接拿整段序列问模型
# ---------------------------------------------------------------------------


def ref_generate(
    prompt: list[int], model: FakeModel, max_new_tokens: int, eos_id: int | None
) -> list[int]:
    seq, out = list(prompt), []
    for _ in range(max_new_tokens):
        logits = model.logits_of(seq)
        best = 0
        for i in range(1, len(logits)):
            if logits[i] > logits[best]:  # 严格大于：并列时留下 id 小的
                best = i
        out.append(best)
        seq.append(best)
        if best == eos_id:
            break
    return out


def ref_calls(prompt: list[int], out: list[int]) -> list[tuple[list[int], int]]:
    """正确的调用序列：prefill 一次，之后每步送上一个 token；最后一个 token 不送。"""
    return [(list(prompt), 0)] + [([out[j]], len(prompt) + j) for j in range(len(out) - 1)]


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def short_ids(ids: list[int]) -> str:
    if len(ids) <= 8:
        return repr(ids)
    return f"[{ids[0]}, {ids[1]}, …, {ids[-1]}]（共 {len(ids)} 个）"


def call_text(tokens: list[int], start: int) -> str:
    return f"step({short_ids(list(tokens))}, {start})"


def check_call_args(
    calls: list[tuple[list[int], int]], prompt: list[int], out: list[int], context: str
) -> None:
    """每次调用的参数，对照学习者自己的输出来查（先不管输出本身对不对）。"""
    check(calls, f"{context}：一次都没有调用 step")
    tokens, start = calls[0]
    if (tokens, start) != (prompt, 0):
        check(
            False,
            f"{context}：第 1 次调用应该是 prefill {call_text(prompt, 0)}（整段提示，缓存里还没有东西），"
            f"你的是 {call_text(tokens, start)}",
        )
    for j in range(1, min(len(calls), len(out))):
        tokens, start = calls[j]
        want = ([out[j - 1]], len(prompt) + j - 1)
        if (tokens, start) == want:
            continue
        lines = [
            (
                f"{context}：第 {j + 1} 次调用应该是 {call_text(*want)}——只送上一步选出的 {out[j - 1]}，"
                f"它的位置是 {want[1]}（前面 {want[1]} 个 token 都已经在缓存里了）；"
            ),
            f"  你的是 {call_text(tokens, start)}",
        ]
        if start == 0 and len(tokens) > 1:
            lines.append(
                "  你每一步都把整段序列从头送了一遍：生成 n 个 token 要重算 n 遍提示，KV 缓存白存了"
            )
        elif tokens == want[0]:
            lines.append(
                "  token 对了，start 不对：start 是这个 token 在整个序列里的下标 = 当前长度 - 1"
            )
        check(False, "\n".join(lines))


def check_call_count(calls: list[tuple[list[int], int]], out: list[int], context: str) -> None:
    """输出对了以后再数调用次数：最后选出的 token 不该再送进模型。"""
    if len(calls) > len(out):
        tokens, start = calls[len(out)]
        check(
            False,
            f"{context}：你一共生成了 {len(out)} 个 token，却调用了 {len(calls)} 次 step。"
            f"第 {len(out) + 1} 次调用 {call_text(tokens, start)} 是多余的：最后选出的 token "
            f"不用再送进模型，循环在它之后就该结束",
        )


def check_output(
    got: list[int],
    want: list[int],
    model: FakeModel,
    prompt: list[int],
    max_new: int,
    eos_id: int | None,
    context: str,
) -> None:
    if got == want:
        return
    hint = ""
    if len(got) > max_new:
        hint = f"生成了 {len(got)} 个，超过了 max_new_tokens={max_new}"
    elif eos_id is not None and want[-1] == eos_id and got == want[:-1]:
        hint = f"生成出 eos_id={eos_id} 时要把它也放进返回值，再停下"
    elif eos_id is not None and want[-1] == eos_id and got[: len(want)] == want:
        hint = f"第 {len(want)} 个 token 就是 eos_id={eos_id}，生成出它就该停下"
    elif eos_id is None and len(got) < len(want) and got == want[: len(got)]:
        hint = f"eos_id 是 None，不该提前停：要正好生成 max_new_tokens={max_new} 个"
    else:
        i = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
        if i is not None:
            logits = model.logits_of(prompt + want[:i])
            if 0 <= got[i] < len(logits) and logits[got[i]] == logits[want[i]]:
                hint = (
                    f"第 {i + 1} 个 token：logits 里 {want[i]} 和 {got[i]} 并列最大（都是 {logits[want[i]]}），"
                    f"并列时要取 id 最小的那个"
                )
    check_equal(got, want, "返回的 token", context + (f"\n  看起来：{hint}" if hint else ""))


def check_one(
    greedy_generate,
    rng: random.Random,
    prompt: list[int],
    max_new: int,
    eos_id: int | None,
    vocab: int,
) -> None:
    context = (
        f"greedy_generate({short_ids(prompt)}, step, max_new_tokens={max_new}, eos_id={eos_id})"
    )
    model = FakeModel(vocab, eos_id, rng.randrange(2**32), context)
    callers_copy = list(prompt)

    got = greedy_generate(prompt, model, max_new, eos_id)
    check_int_list(got, f"{context} 的返回值")
    check_equal(prompt, callers_copy, "调用者传进来的 prompt（不应该被改动）", context)
    check_call_args(model.calls, prompt, got, context)
    want = ref_generate(prompt, model, max_new, eos_id)
    check_output(got, want, model, prompt, max_new, eos_id, context)
    check_call_count(model.calls, got, context)
    assert model.calls == ref_calls(prompt, want)  # 输出对、调用也对，两者必然一致


def run(mod: object) -> None:
    greedy_generate = require(mod, "greedy_generate")
    rng = random.Random(SEED)

    # 先是题目里的提示、只生成 1 个，再是一大批随机的（一半带 eos_id）
    check_one(greedy_generate, rng, [5, 9, 2], 4, None, 16)
    check_one(greedy_generate, rng, [5, 9, 2], 1, None, 16)
    for _ in range(300):
        vocab = rng.randint(4, 32)
        prompt = [rng.randrange(vocab) for _ in range(rng.randint(1, 20))]
        max_new = rng.randint(1, 16)
        eos_id = rng.choice([None, rng.randrange(vocab)])
        check_one(greedy_generate, rng, prompt, max_new, eos_id, vocab)


if __name__ == "__main__":
    main(run)
