"""练习 035 的评测：顺序、线程、submit 不等任务、异常原样抛出、close 之后线程退出。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_raises, main, require, short

SEED = 2035


class Boom(Exception):
    pass


def check_order_and_thread(CpuStream) -> None:
    stream = CpuStream()
    rng = random.Random(SEED)
    seen = []
    n = 300
    for i in range(n):
        pause = rng.random() < 0.05
        stream.submit(lambda i=i, pause=pause: (time.sleep(0.001) if pause else None,
                                                 seen.append((i, threading.get_ident()))))
    stream.synchronize()
    check_equal(len(seen), n, "synchronize() 返回时已经做完的任务数")
    order = [i for i, _ in seen]
    check(order == list(range(n)),
          f"任务没有按提交的先后执行：前几个是 {short(order[:12])}（一个做完才能做下一个）")
    threads = {tid for _, tid in seen}
    check(len(threads) == 1, f"任务在 {len(threads)} 个不同的线程上执行了：应该全在同一个工作线程上")
    check(threading.get_ident() not in threads, "任务在调用 submit 的线程上执行了：要交给工作线程")
    stream.close()


def check_submit_does_not_wait(CpuStream) -> None:
    stream = CpuStream()
    gate, ran = threading.Event(), []
    first = stream.submit(gate.wait, 5)  # 堵住工作线程
    start = time.perf_counter()
    events = [stream.submit(ran.append, i) for i in range(5)]
    took = time.perf_counter() - start
    check(took < 1.0 and not ran,
          f"工作线程被堵住时，submit 等了 {took:.1f} 秒（或者任务已经执行了）：submit 只排队，不等任务执行")
    check(not first.query() and not any(e.query() for e in events),
          "任务还没执行，query() 却说做完了")
    gate.set()
    events[-1].synchronize()
    check_equal(ran, list(range(5)), "放行之后执行的任务")
    check(all(e.query() for e in [first, *events]), "排在最后的任务做完了，前面的 query() 却说没做完")
    stream.close()


def check_exceptions(CpuStream) -> None:
    stream = CpuStream()
    error = Boom("第 2 个任务出错了")
    after = []

    def fail():
        raise error

    ok = stream.submit(after.append, 1)
    bad = stream.submit(fail)
    later = stream.submit(after.append, 3)
    stream.synchronize()  # 不抛
    check_equal(after, [1, 3], "出错的任务前后的任务（出错之后的任务也要照常执行）")
    check(ok.synchronize() is None, "正常完成的任务，synchronize() 应该返回 None")
    try:
        bad.synchronize()
    except Boom as got:
        check(got is error, f"synchronize() 抛出的不是任务里的那个异常对象：{got!r}")
    except BaseException as got:  # noqa: BLE001
        check(False, f"synchronize() 应该原样抛出任务里的 Boom，你抛的是 {got!r}")
    else:
        check(False, "任务里抛了异常，它的事件 synchronize() 却没有抛")
    later.synchronize()
    stream.close()


def check_close(CpuStream) -> None:
    before = set(threading.enumerate())
    stream = CpuStream()
    ident = []
    stream.submit(lambda: ident.append(threading.current_thread()))
    done = []
    for i in range(20):
        stream.submit(lambda i=i: (time.sleep(0.001), done.append(i)))
    stream.close()
    check_equal(done, list(range(20)), "close() 返回时已经做完的任务（要等排着的做完）")
    check(ident and not ident[0].is_alive(), "close() 返回之后，工作线程还活着：要让它退出并 join 它")
    new = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    check(not new, f"close() 之后还有这个对象启动的线程在跑：{new}")
    check_raises(RuntimeError, stream.submit, print, what="close() 之后再 submit")


def run(mod: object) -> None:
    CpuStream = require(mod, "CpuStream")
    require(mod, "CpuEvent")
    check_order_and_thread(CpuStream)
    check_submit_does_not_wait(CpuStream)
    check_exceptions(CpuStream)
    check_close(CpuStream)
    check("concurrent.futures" not in sys.modules,
          "用到了 concurrent.futures：这道题要用 threading 和 queue 自己写")


if __name__ == "__main__":
    main(run)
