"""练习 056 的评测：随机的调用序列（名字、值和值的类型都随机，compile_fn 每次读的名字随机，偶尔编译失败，
中途切换姿态），和参考实现逐次比较结果、抛出的异常和 compiles。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_raises, main, mistake_hint, require, seed, short

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
NAMES = ("bs", "phase", "eps", "step", "shape", "flag")
VALUES = (1, 1.0, True, 2, 0, False, 0.0, "1", "decode", None, (1, 2), (1.0, 2), (True, 2), (2, 2), ())


# ---------------------------------------------------------------------------
# 参考实现：守卫存成 repr 的字符串（repr 分得清 1、1.0、True，也分得清 tuple 里的）
# ---------------------------------------------------------------------------


class RefCache:
    def __init__(self, eager, compile_fn, recompile_limit):
        self.eager, self.compile_fn, self.limit = eager, compile_fn, recompile_limit
        self.fail, self.compiles, self.entries = False, 0, []

    def __call__(self, inputs):
        for guards, compiled in self.entries[::-1]:
            if all(name in inputs and repr(inputs[name]) == r for name, r in guards):
                return compiled(inputs)
        if self.fail and self.compiles:
            raise RuntimeError("recompile")
        if self.compiles == self.limit:
            return self.eager(inputs)
        self.compiles += 1
        compiled, used = self.compile_fn(inputs)
        self.entries.append(([(name, repr(inputs[name])) for name in sorted(used)], compiled))
        return compiled(inputs)


class Plan:
    """一个调用序列：每一步的输入、这一步若编译会读哪些名字、会不会编译失败、之前要不要换姿态。"""

    def __init__(self, rng: random.Random | None, steps: int, scripted: list | None = None, limit: int = 8):
        self.now = 0
        if scripted is not None:
            self.limit, self.steps = limit, scripted
            return
        self.limit = rng.choice([1, 2, 3, 8, 8])
        names = rng.sample(NAMES, rng.randint(1, 4))
        pools = {n: rng.sample(VALUES, rng.randint(1, 4)) for n in names}
        self.steps = []
        for _ in range(steps):
            inputs = {n: rng.choice(pools[n]) for n in names if rng.random() < 0.9}
            used = set(rng.sample(sorted(inputs), rng.randint(0, len(inputs)))) if inputs else set()
            stance = rng.choice(["default", "fail_on_recompile"]) if rng.random() < 0.1 else None
            self.steps.append((inputs, used, rng.random() < 0.05, stance))

    def compile_fn(self, inputs):
        step = self.now
        _, used, fails, _ = self.steps[step]
        if fails:
            raise ValueError(f"第 {step} 步编译失败")

        def compiled(inputs):
            return ("编译的第 %d 份" % step, repr(sorted(inputs.items())))

        return compiled, set(used)

    def eager(self, inputs):
        return ("eager", repr(sorted(inputs.items())))


def outcome(fn, inputs):
    try:
        return "ok", fn(inputs)
    except RuntimeError as e:
        return "RuntimeError", str(e)
    except ValueError as e:
        return "ValueError", str(e)


# 每次评测都走一遍的序列：每条规则至少碰到一次（随机序列不一定碰得到）
SCRIPTED = [
    ({"x": 1, "y": "a"}, {"x"}, False, None),        # 编译第 0 份（守卫 x=1）
    ({"x": 2, "y": "a"}, {"y"}, False, None),        # x 不对：编译第 1 份（守卫 y="a"）
    ({"x": 1, "y": "a"}, {"x"}, False, None),        # 两份都通过：用最新的第 1 份
    ({"x": True, "y": "b"}, {"x"}, False, None),     # True 不是 1：编译
    ({"x": 1.0, "y": "b"}, {"x"}, False, None),      # 1.0 既不是 1 也不是 True：编译
    ({"x": 5, "s": (1, 2)}, {"s"}, False, None),     # 编译（守卫 s=(1, 2)）
    ({"x": 5, "s": (1.0, 2)}, {"s"}, False, None),   # tuple 里的 1.0 不是 1：编译
    ({"x": 9, "y": "z"}, {"x"}, True, None),         # 编译失败：也算一次
    ({"x": 10}, {"x"}, False, None),                 # 第 8 次编译：到上限
    ({"x": 11}, {"x"}, False, None),                 # 到了上限：eager
    ({"x": 12}, {"x"}, False, "fail_on_recompile"),  # 要重编：RuntimeError
    ({"x": 10}, {"x"}, False, None),                 # 守卫通过：照常用第 8 份
]


def check_sequence(mod, rng: random.Random | None, plan: Plan | None = None) -> None:
    plan = plan or Plan(rng, rng.randint(10, 40))
    ref = RefCache(plan.eager, plan.compile_fn, plan.limit)
    cache = mod.CompileCache(plan.eager, plan.compile_fn, plan.limit)
    history = []
    for i, (inputs, used, fails, stance) in enumerate(plan.steps):
        if stance is not None:
            cache.set_stance(stance)
            ref.fail = stance == "fail_on_recompile"
            history.append(f"set_stance({stance!r})")
        plan.now = i
        want = outcome(ref, inputs)
        got = outcome(cache, inputs)
        history.append(f"第 {i} 步 inputs={short(inputs, 70)}（若编译则读 {sorted(used)}）")
        where = f"recompile_limit={plan.limit}，调用序列：\n    " + "\n    ".join(history[-8:])
        hits = []
        if want[0] == "ok" and got[0] == "ok" and want[1][0].startswith("编译") and got[1][0].startswith("编译") \
                and want[1] != got[1]:
            hits.append("用错了一份编译结果：守卫要连类型一起比（1、1.0、True 不同），而且从最新的一份往回找")
        if want[0] == "ok" and want[1][0] == "eager" and got[0] == "ok" and got[1][0] != "eager":
            hits.append(f"compile_fn 已经调用了 recompile_limit={plan.limit} 次：不再编译，退回 eager")
        if want[0] == "RuntimeError":
            check(got[0] == "RuntimeError" and "recompile" in got[1],
                  f"第 {i} 步应该抛出 RuntimeError（消息里有 recompile）：姿态是 fail_on_recompile，"
                  f"没有一份守卫通过。你的结果：{got}\n  {where}")
        elif want[0] == "ValueError":
            check(got[0] == "ValueError", f"第 {i} 步 compile_fn 抛出了 ValueError，应该原样传出去；你的结果：{got}\n  {where}")
        else:
            check_equal(got, want, f"第 {i} 步的结果", where + mistake_hint(hits))
        check_equal(cache.compiles, ref.compiles, f"第 {i} 步之后的 compiles", where + mistake_hint(hits))


def check_bad_arguments(mod) -> None:
    def eager(inputs):
        return "eager"

    def compile_fn(inputs):
        return (lambda inputs: "compiled"), set()

    for limit in (0, -3, True, 2.0):
        check_raises(ValueError, mod.CompileCache, eager, compile_fn, limit,
                     what=f"CompileCache(eager, compile_fn, recompile_limit={limit!r})")
    cache = mod.CompileCache(eager, compile_fn, 2)
    check_raises(ValueError, cache.set_stance, "eager_on_recompile", what="set_stance('eager_on_recompile')")
    check_equal(cache({"x": 1}), "compiled", "姿态设错被拒绝之后的第一次调用（仍是 default，照常编译）")
    check_equal(cache({"x": 2}), "compiled", "compile_fn 什么都没读时（守卫为空），换了输入的调用")
    check_equal(cache.compiles, 1, "守卫为空的那份对任何输入都通过：compiles")


def run(mod: object) -> None:
    require(mod, "CompileCache")
    check_sequence(mod, None, Plan(None, 0, SCRIPTED, limit=8))
    rng = random.Random(SEED)
    for _ in range(60):
        check_sequence(mod, rng)
    check_bad_arguments(mod)


if __name__ == "__main__":
    main(run)
