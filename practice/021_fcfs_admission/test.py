"""练习 021 的评测：题目里的例子，再在几百组随机情形上和独立写的参考实现比较；答错时猜一猜错在哪。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parent.parent)
)  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_int_list, check_raises, check_type, main, require, short, mistake_hint, probe_bad_arguments, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现

# ---------------------------------------------------------------------------
# 参考实现：inflight 逐个位置数“这个位置开了一页新页”；admit 找满足全部条件的最长前缀
# ---------------------------------------------------------------------------


def ref_inflight(running, page_size):
    # 还要写的位置是 [cached_len, max_device_len - 1)；位置 p 落在一页的开头，就要一页新页
    return sum(
        sum(1 for p in range(cached, max_device - 1) if p % page_size == 0)
        for cached, max_device in running
    )


def worst_pages(prompt_len, max_tokens, page_size, minus_one=True):
    tokens = prompt_len + max_tokens - (1 if minus_one else 0)
    return len(range(0, tokens, page_size))  # 0, ps, 2ps, ... 每个开头一页


def ref_admit(queue, free_rows, free_pages, inflight, page_size, token_budget, *,
              minus_one=True, use_inflight=True, first_free=True, skip=False, overshoot=False,
              prompt_only=False):
    """关键字参数是常见的错法，只用来给出提示；默认值就是正确答案。"""
    pages = free_pages - (inflight if use_inflight else 0)
    admitted, used_tokens, used_pages = [], 0, 0
    for i, (prompt_len, max_tokens) in enumerate(queue):
        w = worst_pages(prompt_len, 1 if prompt_only else max_tokens, page_size, minus_one)
        ok_rows = len(admitted) < free_rows
        if overshoot:  # 错法：只看预算还有没有剩
            ok_budget = used_tokens < token_budget or (first_free and not admitted)
        else:
            ok_budget = used_tokens + prompt_len <= token_budget or (first_free and not admitted)
        ok_pages = used_pages + w <= pages
        if ok_rows and ok_budget and ok_pages:
            admitted.append(i)
            used_tokens += prompt_len
            used_pages += w
        elif not skip:
            break
    return admitted


MISTAKES = [
    (dict(skip=True), "放不下的请求被跳过了，后面的小请求插了队；先来先服务要在第一个放不下的请求处停下"),
    (dict(minus_one=False), "最坏情况按 prompt_len + max_tokens 个 token 算了；最后采样出的 token 不进 KV 池，应当是 prompt_len + max_tokens - 1"),
    (dict(prompt_only=True), "只给提示留了页；请求会一直生成到 max_tokens，接纳时要按最坏情况留够"),
    (dict(use_inflight=False), "没有减去在跑的请求还要的页（inflight）；它们将来要用的页不能再许给新请求"),
    (dict(first_free=False), "队首第一个请求也受预算限制了；它再长也要收下，否则永远进不来"),
    (dict(overshoot=True), "只看预算还有没有剩；队首之后的请求，提示长度要放得进剩下的预算"),
]


def describe(queue, kw) -> str:
    args = ", ".join(f"{k}={v}" for k, v in kw.items())
    return f"admit({short(queue, 200)}, {args})"


def check_admit(admit, queue, **kw) -> None:
    context = describe(queue, kw)
    copy = list(queue)
    got = admit(queue, **kw)
    check_int_list(got, f"{context} 的返回值")
    check_equal(queue, copy, "传进来的 queue（不应该被改动）", context)
    want = ref_admit(copy, **kw)
    if got == want:
        return
    hints = [text for variant, text in MISTAKES if got == ref_admit(copy, **kw, **variant)]
    check_equal(got, want, "接纳的下标", context + mistake_hint(hints))


def check_inflight(inflight_pages, running, page_size) -> None:
    call = f"inflight_pages({short(running, 200)}, {page_size})"
    arg = list(running)
    got = inflight_pages(arg, page_size)
    check_type(got, int, f"{call} 的返回值")
    check_equal(arg, running, "传进来的 running（不应该被改动）", call)
    want = ref_inflight(running, page_size)
    hint = ""
    if got == sum(len(range(0, m, page_size)) - len(range(0, c, page_size)) for c, m in running) != want:
        hint = "看起来：把最后一个 token 也算进去了；它采样出来请求就结束，不进 KV 池"
    check_equal(got, want, call, hint)


def check_examples(mod) -> None:
    running = [(9, 20)]
    check_equal(mod.inflight_pages(running, 4), 2, "inflight_pages([(9, 20)], 4)（题目里的例子）")
    check_equal(mod.inflight_pages([(4, 5)], 4), 0,
                "inflight_pages([(4, 5)], 4)（只剩最后一个 token 没采样：它不进 KV 池，不要新页）")
    check_equal(mod.inflight_pages([], 4), 0, "inflight_pages([], 4)（没有在跑的请求）")
    queue = [(5, 8), (6, 3), (9, 4), (1, 1)]
    check_admit(mod.admit, queue, free_rows=3, free_pages=10, inflight=2, page_size=4, token_budget=16)
    check_admit(mod.admit, [(4, 5)], free_rows=1, free_pages=2, inflight=0, page_size=4, token_budget=100)
    check_admit(mod.admit, [(40, 3), (1, 1)], free_rows=2, free_pages=20, inflight=0, page_size=4, token_budget=8)
    check_admit(mod.admit, [(2, 2)] * 5, free_rows=3, free_pages=99, inflight=0, page_size=1, token_budget=99)
    check_equal(mod.admit([], free_rows=3, free_pages=9, inflight=0, page_size=4, token_budget=9), [],
                "admit([])（队列是空的）")


def check_bad_arguments(mod, rng: random.Random) -> None:
    bad_page_sizes = [0, -1, -rng.randint(2, 64)]
    probe_bad_arguments(mod.inflight_pages, dict(running=[(1, 3)], page_size=rng.choice([1, 2, 4])),
                        dict(page_size=bad_page_sizes), rng, name="inflight_pages")
    good = dict(queue=[(rng.randint(1, 8), rng.randint(1, 8))], free_rows=rng.randint(1, 4),
                free_pages=rng.randint(4, 40), inflight=0, page_size=rng.choice([1, 2, 4]),
                token_budget=rng.choice([8, 64]))
    probe_bad_arguments(lambda queue, **kw: mod.admit(queue, **kw), good, dict(page_size=bad_page_sizes), rng,
                        name="admit")


def random_case(rng: random.Random):
    page_size = rng.choice([1, 1, 2, 4, 4, 16])
    running = []
    for _ in range(rng.randint(0, 5)):
        max_device = rng.randint(2, 80)
        running.append((rng.randint(1, max_device - 1), max_device))
    queue = [(rng.randint(1, 40), rng.choice([1, rng.randint(1, 8), rng.randint(1, 40)]))
             for _ in range(rng.randint(1, 8))]
    inflight = ref_inflight(running, page_size)
    free_pages = inflight + rng.randint(0, 60 // page_size + 4)
    kw = dict(free_rows=rng.randint(0, 6), free_pages=free_pages, inflight=inflight,
              page_size=page_size, token_budget=rng.choice([1, 8, 16, 32, 64, 8192]))
    if rng.random() < 0.3:  # 正好放得下：预算正好等于前几个请求的提示长度之和，页正好够
        k = rng.randint(1, len(queue))
        kw["token_budget"] = sum(p for p, _ in queue[:k])
        kw["free_pages"] = inflight + sum(worst_pages(p, m, page_size) for p, m in queue[:k])
        kw["free_rows"] = max(kw["free_rows"], k)
    return running, queue, kw


def run(mod: object) -> None:
    require(mod, "inflight_pages")
    require(mod, "admit")
    check_examples(mod)
    rng = random.Random(SEED)
    for _ in range(400):
        running, queue, kw = random_case(rng)
        check_inflight(mod.inflight_pages, running, kw["page_size"])
        check_admit(mod.admit, queue, **kw)
    check_bad_arguments(mod, random.Random(SEED + 1))


if __name__ == "__main__":
    main(run)
