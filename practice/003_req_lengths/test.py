"""练习 003 的评测：随机走完几百个请求的一生，每一步都核对全部长度。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import (
    seed,
    bad_int,
    check,
    check_equal,
    check_int_list,
    check_raises,
    check_type,
    main,
    probe_bad_arguments,
    require,
)

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


# ---------------------------------------------------------------------------
# 参考答案：不模拟对象，直接用“第 k 步之后”的闭式公式算出每个长度应该是多少
# ---------------------------------------------------------------------------


def expected_after(prompt_len: int, cached0: int, output_len: int, k: int) -> dict[str, object]:
    """完成 k 步（k 次 complete_one + append）之后，各个长度应该是多少。"""
    device = prompt_len + k
    cached = cached0 if k == 0 else prompt_len + k - 1  # 第 k 步送进去的 token 都进了缓存
    return {
        "cached_len": cached,
        "device_len": device,
        "max_device_len": prompt_len + output_len,
        "extend_len": device - cached,
        "remain_len": output_len - k,
        "can_decode": k < output_len,
    }


def describe(prompt: list[int], cached0: int, output_len: int) -> str:
    ids = short_ids(prompt)
    return f"ReqState({ids}, cached_len={cached0}, output_len={output_len})"


def short_ids(ids: list[int]) -> str:
    if len(ids) <= 6:
        return repr(ids)
    return f"[{ids[0]}, {ids[1]}, …, {ids[-1]}]（共 {len(ids)} 个）"


# ---------------------------------------------------------------------------
# 检查
# ---------------------------------------------------------------------------


def read_lengths(req: object, when: str) -> dict[str, object]:
    """读出全部长度，顺便检查类型：长度必须是 int，can_decode 必须是 bool。"""
    values: dict[str, object] = {}
    for name in ("cached_len", "device_len", "max_device_len", "extend_len", "remain_len"):
        check(hasattr(req, name), f"{when}，ReqState 对象上没有 {name}")
        value = getattr(req, name)
        check_type(value, int, f"{when}的 {name}")
        values[name] = value
    check(hasattr(req, "can_decode"), f"{when}，ReqState 对象上没有 can_decode")
    check_type(req.can_decode, bool, f"{when}的 can_decode")
    values["can_decode"] = req.can_decode
    return values


def check_lengths(req: object, expected: dict[str, object], when: str, context: str) -> None:
    actual = read_lengths(req, when)
    for name, want in expected.items():
        check_equal(actual[name], want, f"{when}的 {name}", context)


def check_bad_arguments(ReqState: type, rng: random.Random) -> None:
    """坏参数：提示词长度、缓存长度、输出长度都随机；坏值也随机（就在边界上，或者远一些）。"""

    def make(input_ids, cached_len, output_len):
        return ReqState(input_ids, cached_len, output_len)

    for n in (rng.randint(1, 3), rng.randint(4, 16), rng.randint(17, 300)):  # 短的、中等的、很长的提示词
        ids = [rng.randrange(50_000) for _ in range(n)]
        cached = rng.choice([0, rng.randrange(n)])
        good = dict(input_ids=ids, cached_len=cached, output_len=rng.randint(1, 64))
        bad = dict(
            # cached_len 等于提示词长度（没有 token 可算）、比提示词还长、是负数
            cached_len=lambda r: r.choice([n, n + r.randint(1, 1000), bad_int(r, 0)]),
            # 提示词是空的，或者不比 cached_len 长
            input_ids=lambda r: r.choice([[], ids[: r.randint(0, cached)]]),
            # output_len 是 0 或负数：一个 token 都不生成
            output_len=lambda r: bad_int(r, 1),
        )
        for key in bad:  # 每一种都查到；坏值每次现抽
            probe_bad_arguments(make, good, {key: bad[key]}, rng, name="ReqState", tries=2)


def check_one_life(
    ReqState: type, rng: random.Random, prompt_len: int, cached0: int, output_len: int
) -> None:
    prompt = [rng.randrange(50_000) for _ in range(prompt_len)]
    callers_copy = list(prompt)
    context = describe(prompt, cached0, output_len)

    req = ReqState(prompt, cached0, output_len)
    check_int_list(getattr(req, "input_ids", None), "构造后的 input_ids")
    check_equal(req.input_ids, prompt, "构造后的 input_ids", context)
    check(
        req.input_ids is not prompt,
        f"{context}：input_ids 应该是传入列表的拷贝（list(input_ids)），不能是同一个对象",
    )
    check_lengths(req, expected_after(prompt_len, cached0, output_len, 0), "刚构造时", context)
    check_raises(
        RuntimeError, req.append, 1, what=f"{context} 刚构造完就 append（还没 complete_one）"
    )

    generated: list[int] = []
    for k in range(1, output_len + 1):
        when = f"第 {k} 步"
        req.complete_one()
        expected = expected_after(prompt_len, cached0, output_len, k)
        check_lengths(req, expected, f"{when} complete_one() 之后", context)
        check_equal(
            req.input_ids,
            prompt + generated,
            f"{when} complete_one() 之后的 input_ids（complete_one 不该动它）",
            context,
        )
        token = rng.randrange(50_000)
        req.append(token)
        generated.append(token)
        check_equal(
            req.input_ids, prompt + generated, f"{when} append({token}) 之后的 input_ids", context
        )
        check_lengths(req, expected, f"{when} append() 之后（append 不该动长度）", context)
        if k == 1:
            check_raises(RuntimeError, req.append, 2, what=f"{context} 第 1 步里连着 append 两次")
        check_equal(
            len(req.input_ids),
            req.device_len,
            f"{when} append() 之后 len(input_ids) 与 device_len 的关系",
            context,
        )

    check_raises(
        RuntimeError,
        req.complete_one,
        what=f"{context} 已生成 {output_len} 个 token 之后再 complete_one",
    )
    check_equal(prompt, callers_copy, "调用者传进来的列表（不应该被 append 改掉）", context)


def run(mod: object) -> None:
    ReqState = require(mod, "ReqState")
    check(isinstance(ReqState, type), "ReqState 应该是一个类")

    rng = random.Random(SEED)
    check_bad_arguments(ReqState, random.Random(SEED + 1))
    # 先走几个好懂的：没有缓存、命中一部分、只生成一个
    for prompt_len, cached0, output_len in [(5, 0, 3), (5, 2, 3), (1, 0, 1), (4, 3, 1)]:
        check_one_life(ReqState, rng, prompt_len, cached0, output_len)
    # 再走一批随机的（每次评测的种子都不同；每读一次属性都要跨一次进程，40 个就够覆盖各种组合）
    for _ in range(40):
        prompt_len = rng.randint(1, 64)
        cached0 = rng.choice([0, rng.randrange(prompt_len)])
        output_len = rng.randint(1, 16)
        check_one_life(ReqState, rng, prompt_len, cached0, output_len)


if __name__ == "__main__":
    main(run)
