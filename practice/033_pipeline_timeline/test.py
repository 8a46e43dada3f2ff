"""练习 033 的评测：和一个独立写的事件模拟比较（CPU 瓶颈、设备瓶颈、两者交替都有）。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_raises, check_type, main, require, short, seed, bad_int, probe_bad_arguments, with_bad_item

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


def reference(prepare, forward, process):
    """按事件模拟：CPU 线程是一串动作，设备是一条 FIFO 队列。"""
    n = len(prepare)
    normal = 0
    for i in range(n):
        normal += prepare[i] + forward[i] + process[i]
    # CPU 线程的动作序列：准备 0、准备 1、处理 0、准备 2、处理 1、……、处理 n-1
    actions = []
    for i in range(n):
        actions.append(("准备", i))
        if i > 0:
            actions.append(("处理", i - 1))
    if n:
        actions.append(("处理", n - 1))
    clock, launched, finished, device = 0, {}, {}, 0
    for kind, i in actions:
        if kind == "准备":
            clock += prepare[i]
            launched[i] = clock
            device = max(device, launched[i]) + forward[i]  # 设备按发出的顺序一个个做
            finished[i] = device
        else:
            clock = max(clock, finished[i]) + process[i]
    return normal, clock


def check_case(pipeline_time, prepare, forward, process, why=""):
    context = f"pipeline_time({prepare}, {forward}, {process})" if len(prepare) <= 8 else (
        f"pipeline_time(prepare={short(prepare, 80)}, forward={short(forward, 80)}, "
        f"process={short(process, 80)})")
    args = (list(prepare), list(forward), list(process))
    got = pipeline_time(*args)
    check(isinstance(got, tuple) and len(got) == 2,
          f"{context} 应该返回 (normal, overlap) 两项组成的 tuple，你返回的是 {short(got)}")
    check_type(got[0], int, f"{context} 的 normal")
    check_type(got[1], int, f"{context} 的 overlap")
    want = reference(prepare, forward, process)
    check_equal(got[0], want[0], "不重叠的总时间", context)
    hint = ""
    if got[1] != want[1] and got[1] == max(sum(prepare) + sum(process), sum(forward)):
        hint += "\n  看起来你用了 max(CPU 的和, 前向的和)：第一次准备和最后一次处理藏不住，等待也会往后传"
    if got[1] != want[1] and got[1] == sum(max(p + r, f) for p, f, r in zip(prepare, forward, process)):
        hint += "\n  看起来你把每一步单独取了 max：某一步的等待会推迟后面所有的步，要逐步模拟"
    check_equal(got[1], want[1], "重叠的总时间" + (f"（{why}）" if why else ""), context + hint)
    check_equal(args, (list(prepare), list(forward), list(process)), "调用者传进来的列表（不应该被改动）",
                context)


def run(mod: object) -> None:
    pipeline_time = require(mod, "pipeline_time")
    check_case(pipeline_time, [1, 1, 1], [5, 5, 5], [2, 2, 2], "题目里的例子")
    check_equal(pipeline_time([1, 1, 1], [5, 5, 5], [2, 2, 2]), (24, 18), "题目里的例子")
    check_equal(pipeline_time([], [], []), (0, 0), "pipeline_time([], [], [])")
    check_case(pipeline_time, [4], [3], [2], "只有一批：什么都藏不住")
    check_case(pipeline_time, [3, 3, 3, 3], [1, 1, 1, 1], [3, 3, 3, 3], "CPU 是瓶颈")
    check_case(pipeline_time, [1, 1, 9, 1, 1], [6, 1, 6, 1, 6], [1, 9, 1, 1, 1], "两边交替当瓶颈")
    rng = random.Random(SEED)
    for _ in range(300):
        n = rng.randint(1, 12)
        scale_cpu, scale_dev = rng.choice([(3, 20), (20, 3), (10, 10)])
        prepare = [rng.randint(0, scale_cpu) for _ in range(n)]
        forward = [rng.randint(0, scale_dev) for _ in range(n)]
        process = [rng.randint(0, scale_cpu) for _ in range(n)]
        check_case(pipeline_time, prepare, forward, process)
    for args, why in [(([1, 2], [1], [1, 1]), "forward 少一个"), (([1], [1], [-1]), "有负数")]:
        check_raises(ValueError, pipeline_time, *args, what=f"pipeline_time{args}（{why}）")
    # 坏的那一个在随机的列表、随机的位置，是随机的负数；或者随机一个列表长了 / 短了
    n = rng.randint(3, 8)
    good = {name: [rng.randint(0, 9) for _ in range(n)] for name in ("prepare", "forward", "process")}

    def spoiled(name):
        return lambda r: r.choice([
            lambda r: with_bad_item(r, good[name], lambda t, r: bad_int(r, 0)),
            lambda r: good[name][: r.randrange(n)],
            lambda r: good[name] + [r.randint(0, 9) for _ in range(r.randint(1, 3))],
        ])(r)

    probe_bad_arguments(lambda prepare, forward, process: pipeline_time(prepare, forward, process), good, {name: spoiled(name) for name in good}, rng,
                        name="pipeline_time", tries=40)


if __name__ == "__main__":
    main(run)
