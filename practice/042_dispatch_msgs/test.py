"""练习 042 的评测：随机的嵌套消息，和独立写的参考实现逐项比较调用顺序、拒绝列表、返回值。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_raises, check_type, main, require, short, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


class SchedulerBug(RuntimeError):
    pass


class FakeScheduler:
    """记下每次调用；prompt_len 为 0 或超过 limit 的请求抛 ValueError，prompt_len == -7 时"自己出 bug"。"""

    def __init__(self, limit: int) -> None:
        self.limit, self.calls = limit, []

    def add_req(self, uid: int, prompt_len: int) -> None:
        self.calls.append(("add", uid))
        if prompt_len == -7:
            raise SchedulerBug("调度器内部出错")
        if prompt_len == 0:
            raise ValueError(f"请求 {uid}：提示是空的")
        if prompt_len > self.limit:
            raise ValueError(f"请求 {uid}：提示太长（{prompt_len} > {self.limit}）")

    def abort_req(self, uid: int) -> bool:
        self.calls.append(("abort", uid))
        return uid % 2 == 0


def reference(msgs, sched):
    """不用递归：一个显式的栈，栈顶是"还没处理的消息"的迭代器。"""
    rejects, stack = [], [iter(msgs)]
    while stack:
        msg = next(stack[-1], None)
        if msg is None:
            stack.pop()
            continue
        if msg[0] == "batch":
            stack.append(iter(msg[1]))
        elif msg[0] == "exit":
            return rejects, False
        elif msg[0] == "user":
            try:
                sched.add_req(msg[1], msg[2])
            except ValueError as e:
                rejects.append((msg[1], str(e)))
        elif msg[0] == "abort":
            sched.abort_req(msg[1])
        else:
            raise TypeError(f"不认识的消息 {msg!r}")
    return rejects, True


def random_msgs(rng: random.Random, depth: int, uid: list[int], exit_p: float) -> list[tuple]:
    out = []
    for _ in range(rng.randint(0, 5)):
        r = rng.random()
        if r < 0.25 and depth < 3:
            out.append(("batch", random_msgs(rng, depth + 1, uid, exit_p)))
        elif r < exit_p:
            out.append(("exit",))
        elif r < 0.75:
            uid[0] += 1
            out.append(("user", uid[0], rng.choice([0, 3, 8, 20, 40, 64])))
        else:
            out.append(("abort", rng.randint(0, uid[0] + 2)))
    return out


def all_places(msgs: list, path: str = "msgs") -> list[tuple[list, str]]:
    """msgs 和它里面每一个包的消息列表，带着路径：坏消息可以插在其中随便哪个的随便哪个位置。"""
    out = [(msgs, path)]
    for i, msg in enumerate(msgs):
        if msg[0] == "batch":
            out += all_places(msg[1], f"{path}[{i}][1]")
    return out


UNKNOWN_KINDS = ["ping", "users", "Exit", "batches", "", "abort ", "stop", "USER"]


def run_bad_case(dispatch, rng: random.Random, kind: str) -> None:
    """随机的嵌套消息（没有退出），随机的一层、随机的位置上放一条坏消息：
    不认识的种类要抛 TypeError；调度器自己的错误（prompt_len == -7）要当场原样抛出，它后面的消息不再处理。"""
    uid = [0]
    msgs = random_msgs(rng, 0, uid, exit_p=0.0)
    where, path = rng.choice(all_places(msgs))
    i = rng.randint(0, len(where))
    if kind == "bug":
        uid[0] += 1
        bad = ("user", uid[0], -7)
    else:
        bad = (rng.choice(UNKNOWN_KINDS),) + tuple(rng.randint(0, 9) for _ in range(rng.randint(0, 2)))
    where.insert(i, bad)
    limit = rng.choice([10, 30, 50])
    mine, ref = FakeScheduler(limit), FakeScheduler(limit)
    error = SchedulerBug if kind == "bug" else TypeError
    try:
        reference(msgs, ref)
    except error:
        pass
    context = short(msgs, 300)
    if kind == "bug":
        e = check_raises(SchedulerBug, dispatch, msgs, mine.add_req, mine.abort_req,
                         what=f"{path}[{i}] 的 add_req 抛出的不是 ValueError（调度器自己的 bug）时，dispatch"
                              f"\n  输入：{context}\n ")
        check(isinstance(e, SchedulerBug), "不该吞掉调度器自己的错误")
        if len(mine.calls) > len(ref.calls) and mine.calls[:len(ref.calls)] == ref.calls:
            check(False, f"调度器自己的错误要当场原样抛出去：{path}[{i}] 出错以后，后面的消息不该再处理。"
                         f"\n  输入：{context}\n  多出的调用：{short(mine.calls[len(ref.calls):])}")
        check_equal(mine.calls, ref.calls, "出错之前对调度器的调用（顺序）", context)
    else:
        check_raises(TypeError, dispatch, msgs, mine.add_req, mine.abort_req,
                     what=f"{path}[{i}] 是不认识的消息 {bad!r}\n  输入：{context}\n ")


def run_case(dispatch, msgs, limit: int) -> None:
    mine, ref = FakeScheduler(limit), FakeScheduler(limit)
    expected = reference(msgs, ref)
    got = dispatch(msgs, mine.add_req, mine.abort_req)
    check_type(got, tuple, "dispatch 的返回值")
    check(len(got) == 2, f"dispatch 应该返回 (拒绝列表, 是否继续运行) 两项，你的是 {short(got)}")
    rejects, running = got
    check_type(rejects, list, "拒绝列表")
    context = short(msgs, 300)
    if len(mine.calls) > len(ref.calls) and mine.calls[:len(ref.calls)] == ref.calls and not expected[1]:
        check(False, f"退出之后还在处理消息：("
                     f"exit) 后面的消息一条都不该处理。\n  输入：{context}\n"
                     f"  多出的调用：{short(mine.calls[len(ref.calls):])}")
    check_equal(mine.calls, ref.calls, "对调度器的调用（顺序）", context)
    check_equal(rejects, expected[0], "拒绝列表", context)
    check(running is expected[1], f"是否继续运行应该是 {expected[1]}，你的是 {short(running)}"
                                  f"\n  输入：{context}")


def run(mod: object) -> None:
    dispatch = require(mod, "dispatch")
    # 手写的几个：嵌套、包里的退出、拒绝之后接着处理
    run_case(dispatch, [("user", 1, 5), ("user", 2, 0), ("user", 3, 6)], limit=10)
    run_case(dispatch, [("batch", [("user", 1, 5), ("batch", [("abort", 1), ("exit",), ("user", 2, 5)]),
                                   ("user", 3, 5)]), ("abort", 3)], limit=10)
    run_case(dispatch, [("batch", []), ("batch", [("batch", [("user", 4, 50)])])], limit=10)
    rng = random.Random(SEED)
    for trial in range(400):
        uid = [0]
        msgs = random_msgs(rng, 0, uid, exit_p=0.3 if trial % 3 == 0 else 0.0)
        run_case(dispatch, msgs, limit=rng.choice([10, 30, 50]))
    # 调度器自己的错误不能当成拒绝
    sched = FakeScheduler(10)
    error = check_raises(SchedulerBug, dispatch, [("user", 1, 5), ("user", 2, -7), ("user", 3, 5)],
                         sched.add_req, sched.abort_req,
                         what="add_req 抛出的不是 ValueError（调度器自己的 bug）时，dispatch")
    check(isinstance(error, SchedulerBug), "不该吞掉调度器自己的错误")
    sched = FakeScheduler(10)
    check_raises(TypeError, dispatch, [("ping", 1)], sched.add_req, sched.abort_req,
                 what="不认识的消息 ('ping', 1)")
    sched = FakeScheduler(10)
    check_raises(TypeError, dispatch, [("batch", [("user", 1, 5), ("batch", [("ping",)])])],
                 sched.add_req, sched.abort_req, what="包里嵌套的不认识的消息 ('ping',)")
    kinds = ["bug", "unknown"] * 15  # 坏消息在随机的一层、随机的位置
    rng.shuffle(kinds)
    for kind in kinds:
        run_bad_case(dispatch, rng, kind)


if __name__ == "__main__":
    main(run)
