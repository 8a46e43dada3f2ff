"""练习 035 的评测：顺序、线程、submit 不等任务、异常原样抛出、close 之后线程退出。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_raises, learner_modules, main, require, short, seed, stage

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现

# 任务要在你的工作线程上执行，执行时记下“哪个线程、第几个”：这只能在你的进程里发生。所以交给 submit
# 的任务都是这段驱动里的函数（在你的进程里，不回调评测进程），它们只记录；记下的东西按值交回来，
# 顺序、线程、异常对不对都在评测进程里判断。它和你的代码同在一个进程里，没有参考实现，也没有结论。
STAGE = """
import threading
import time


class Log:
    def __init__(self):
        self.items = []

    def add(self, item):
        self.items.append(item)

    def add_here(self, item, pause=False):  # 记下执行它的线程
        if pause:
            time.sleep(0.001)
        self.items.append((item, threading.get_ident()))

    def add_later(self, item):
        time.sleep(0.001)
        self.items.append(item)


class Boom(Exception):
    pass


def boom(text):
    return Boom(text)


def raise_it(error):
    raise error


def outcome(fn):  # 调用 fn：("raised", 异常对象) 或者 ("returned", 返回值)
    try:
        value = fn()
    except BaseException as error:
        return "raised", error
    return "returned", value


def caller():  # 评测的请求都在这个线程上处理：调用 submit 的就是它
    return threading.get_ident()


def live_threads():
    return sorted(t.ident for t in threading.enumerate() if t.is_alive())


def gate():
    return threading.Event()


def noop():
    return None
"""


def check_order_and_thread(CpuStream, kit) -> None:
    stream = CpuStream()
    rng = random.Random(SEED)
    log = kit.Log()
    n = 300
    for i in range(n):
        stream.submit(log.add_here, i, rng.random() < 0.05)
    stream.synchronize()
    seen = log.items
    check_equal(len(seen), n, "synchronize() 返回时已经做完的任务数")
    order = [i for i, _ in seen]
    check(order == list(range(n)),
          f"任务没有按提交的先后执行：前几个是 {short(order[:12])}（一个做完才能做下一个）")
    threads = {tid for _, tid in seen}
    check(len(threads) == 1, f"任务在 {len(threads)} 个不同的线程上执行了：应该全在同一个工作线程上")
    check(kit.caller() not in threads, "任务在调用 submit 的线程上执行了：要交给工作线程")
    stream.close()


def check_submit_does_not_wait(CpuStream, kit) -> None:
    stream = CpuStream()
    gate, log = kit.gate(), kit.Log()
    first = stream.submit(gate.wait, 5)  # 堵住工作线程
    start = time.perf_counter()
    events = [stream.submit(log.add, i) for i in range(5)]
    took = time.perf_counter() - start
    check(took < 1.0 and not log.items,
          f"工作线程被堵住时，submit 等了 {took:.1f} 秒（或者任务已经执行了）：submit 只排队，不等任务执行")
    check(not first.query() and not any(e.query() for e in events),
          "任务还没执行，query() 却说做完了")
    gate.set()
    events[-1].synchronize()
    check_equal(log.items, list(range(5)), "放行之后执行的任务")
    check(all(e.query() for e in [first, *events]), "排在最后的任务做完了，前面的 query() 却说没做完")
    stream.close()


def check_exceptions(CpuStream, kit) -> None:
    stream = CpuStream()
    error = kit.boom(f"第 2 个任务出错了 #{SEED % 1000}")
    log = kit.Log()
    ok = stream.submit(log.add, 1)
    bad = stream.submit(kit.raise_it, error)
    later = stream.submit(log.add, 3)
    stream.synchronize()  # 不抛
    check_equal(log.items, [1, 3], "出错的任务前后的任务（出错之后的任务也要照常执行）")
    check(ok.synchronize() is None, "正常完成的任务，synchronize() 应该返回 None")
    kind, got = kit.outcome(bad.synchronize)
    check(kind == "raised", "任务里抛了异常，它的事件 synchronize() 却没有抛")
    # 同一个异常对象：在你的进程里是同一个对象，到这边就是同一个句柄
    check(got is error, f"synchronize() 应该原样抛出任务里的那个异常对象，你抛的是 {got!r}")
    later.synchronize()
    stream.close()


def check_close(CpuStream, kit) -> None:
    before = set(kit.live_threads())
    stream = CpuStream()
    log, done = kit.Log(), kit.Log()
    stream.submit(log.add_here, "worker")
    for i in range(20):
        stream.submit(done.add_later, i)
    stream.close()
    check_equal(done.items, list(range(20)), "close() 返回时已经做完的任务（要等排着的做完）")
    worker = [tid for _, tid in log.items]
    live = set(kit.live_threads())
    check(worker and worker[0] not in live, "close() 返回之后，工作线程还活着：要让它退出并 join 它")
    new = sorted(live - before)
    check(not new, f"close() 之后还有这个对象启动的线程在跑：{new}")
    check_raises(RuntimeError, stream.submit, kit.noop, what="close() 之后再 submit")


def run(mod: object) -> None:
    CpuStream = require(mod, "CpuStream")
    require(mod, "CpuEvent")
    kit = stage(mod, STAGE)
    check_order_and_thread(CpuStream, kit)
    check_submit_does_not_wait(CpuStream, kit)
    check_exceptions(CpuStream, kit)
    check_close(CpuStream, kit)
    check("concurrent.futures" not in learner_modules(mod),
          "用到了 concurrent.futures：这道题要用 threading 和 queue 自己写")


if __name__ == "__main__":
    main(run)
