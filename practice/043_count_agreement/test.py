"""练习 043 的评测：线程扮演 2–4 个 rank，消息随机到达、转发有随机延迟，各 rank 的步调也不同。

每个 rank 的 receive 在它自己的子进程里（more_processes：就像真的多个调度器进程），由评测进程的一个
线程驱动；inbox、pub、sub、broadcast 都在评测进程里，你的代码调用它们就是跨进程的回调。

检查：每一步各 rank 收到的消息相同；全部消息不丢、不重复、保持顺序；blocking 的约定。
用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import collections
import queue
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_type, main, more_processes, require, short, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
WAIT_S = 4.0  # 一个 rank 等消息、等广播最多等这么久


class Stuck(Exception):
    """某个 rank 等不到它在等的东西：各 rank 已经不同步了。"""


class Inbox:
    """rank 0 的收件箱：生产者线程按随机间隔放消息进来。"""

    def __init__(self) -> None:
        self.items: collections.deque[str] = collections.deque()
        self.cond = threading.Condition()
        self.bad_wait = False

    def push(self, msg: str) -> None:
        with self.cond:
            self.items.append(msg)
            self.cond.notify_all()

    def poll(self) -> list[str]:
        with self.cond:
            out = list(self.items)
            self.items.clear()
            return out

    def wait(self) -> str:
        if not getattr(_local, "blocking", True):
            self.bad_wait = True
        with self.cond:
            if not self.cond.wait_for(lambda: self.items, timeout=WAIT_S):
                raise Stuck("rank 0 在 inbox.wait() 里等了几秒也没有消息")
            return self.items.popleft()


class Sub:
    """一个 rank ≥ 1 的订阅端：rank 0 转发的消息过一段随机延迟才送到（顺序不变）。"""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.visible = rng, collections.deque()
        self.cond, self.last_due = threading.Condition(), 0.0
        self.in_flight: queue.Queue = queue.Queue()
        threading.Thread(target=self._deliver, daemon=True).start()

    def deliver_later(self, msg: str) -> None:
        with self.cond:
            self.last_due = max(self.last_due, time.perf_counter() + self.rng.uniform(0.0005, 0.004))
            self.in_flight.put((self.last_due, msg))

    def _deliver(self) -> None:  # 按转发的顺序，到点才放出来
        while True:
            due, msg = self.in_flight.get()
            time.sleep(max(0.0, due - time.perf_counter()))
            with self.cond:
                self.visible.append(msg)
                self.cond.notify_all()

    def get(self) -> str:
        _local.got_from_sub = True
        with self.cond:
            if not self.cond.wait_for(lambda: self.visible, timeout=WAIT_S):
                raise Stuck("rank ≥ 1 在 sub.get() 里等了几秒也没有等到 rank 0 转发的消息")
            return self.visible.popleft()

    def poll(self) -> list[str]:
        with self.cond:
            out = list(self.visible)
            self.visible.clear()
            return out


class Pub:
    def __init__(self, subs: list[Sub]) -> None:
        self.subs = subs

    def put(self, msg: str) -> None:
        check_type(msg, str, "pub.put 的参数")
        for sub in self.subs:
            sub.deliver_later(msg)


class Broadcast:
    """集合操作：每个 rank 调用一次，都拿到 rank 0 的值。"""

    def __init__(self, world: int) -> None:
        self.barrier = threading.Barrier(world, timeout=WAIT_S)
        self.value = None
        self.idle_waits_here = False  # 空闲的 rank ≥ 1 没等 sub.get() 就进了广播

    def __call__(self, rank: int, n: int) -> int:
        if rank > 0 and getattr(_local, "blocking", False) and not getattr(_local, "got_from_sub", True):
            self.idle_waits_here = True
        try:
            if rank == 0:
                self.value = n
            self.barrier.wait()
            value = self.value
            self.barrier.wait()  # 人人读完，rank 0 才能写下一次
            return value
        except threading.BrokenBarrierError:
            raise Stuck("broadcast 等不齐所有 rank：有的 rank 没来，或者来的次数不同") from None


_local = threading.local()


def weight(msg: str) -> int:
    return int(msg.split("-")[1]) % 3  # 一条消息给这个 rank 带来几步的活（0–2）


def rank_loop(rank, receive, inbox, pub, sub, broadcast, rng, log, errors) -> None:
    work, step = 0, 0
    try:
        while True:
            blocking = work == 0
            _local.blocking, _local.got_from_sub = blocking, False
            msgs = receive(rank, blocking, inbox if rank == 0 else None, pub if rank == 0 else None,
                           sub, lambda n: broadcast(rank, n))
            _local.blocking = True
            if not isinstance(msgs, list):
                errors.append(f"receive 应该返回 list，rank {rank} 拿到的是 {type(msgs).__name__}")
                return
            if blocking and not msgs:
                errors.append(f"blocking=True 时要等到至少一条消息，rank {rank} 在第 {step} 步返回了空列表")
                return
            log.append(list(msgs))
            if any(m == "stop" for m in msgs):
                return
            work += sum(weight(m) for m in msgs)
            work = max(0, work - 1)
            time.sleep(rng.uniform(0, 0.003))  # 各 rank 的步调不同
            step += 1
            if step > 2000:
                errors.append(f"rank {rank} 走了 2000 步还没收到结束消息")
                return
    except Stuck as e:
        errors.append(f"rank {rank}：{e}")
    except NotImplementedError:
        errors.append(NotImplementedError)
    except Exception as e:  # noqa: BLE001 - 学习者的代码出错
        errors.append(f"rank {rank} 的 receive 出错：{type(e).__name__}: {e}")
    except BaseException as e:  # noqa: BLE001 - 这个 rank 的进程没了、卡住了（超过了墙钟时间的兜底）
        errors.append(e)  # 交给主线程重新抛出：结论是“超时”或“进程没了”


def trial(receives, world: int, seed: int, n_msgs: int) -> None:
    rng = random.Random(seed)
    inbox = Inbox()
    subs = [Sub(random.Random(seed * 10 + r)) for r in range(world)]
    pub, broadcast = Pub(subs[1:]), Broadcast(world)
    logs: list[list] = [[] for _ in range(world)]
    errors: list[str] = []
    sent = [f"m-{i}" for i in range(n_msgs)] + ["stop"]

    def produce():
        for msg in sent:
            time.sleep(rng.choice([0, 0, 0.0005, 0.002, 0.006]))
            inbox.push(msg)

    threads = [threading.Thread(target=rank_loop, daemon=True,
                                args=(r, receives[r], inbox, pub, subs[r], broadcast, random.Random(seed + r),
                                      logs[r], errors)) for r in range(world)]
    producer = threading.Thread(target=produce, daemon=True)
    for t in [producer, *threads]:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for e in errors:
        if isinstance(e, BaseException):
            raise e
    if NotImplementedError in errors:
        raise NotImplementedError("receive 还没写完")
    check(not any(t.is_alive() for t in threads), f"{world} 个 rank 里有的卡住了（30 秒没结束）")
    for r in range(1, world):  # 先找第一个不一样的步：后面的卡住、超时多半是它引起的
        for step, (a, b) in enumerate(zip(logs[0], logs[r])):
            check(a == b, f"{world} 个 rank：第 {step} 步 rank 0 收到 {short(a)}，rank {r} 收到 {short(b)}"
                          "——同一步收到的消息必须相同")
    check(not errors, f"{world} 个 rank：" + "；".join(errors[:3]))
    check(not broadcast.idle_waits_here, "blocking=True 时 rank ≥ 1 还没 sub.get() 到第一条就进了 broadcast："
                                         "空闲的 rank 要等在 sub.get() 上，集合通信有超时")
    check(not inbox.bad_wait, "blocking=False 时 rank 0 调用了 inbox.wait()：有活要干时不该等消息")
    for r in range(1, world):
        check(len(logs[0]) == len(logs[r]), f"rank 0 走了 {len(logs[0])} 步，rank {r} 走了 {len(logs[r])} 步")
    got = [m for step in logs[0] for m in step]
    check(got == sent, f"rank 0 收到的全部消息（按顺序）应该是 m-0 … m-{n_msgs - 1}、stop，"
                       f"你的开头是 {short(got[:8])}（丢了、重复了或者乱序了）")


def run(mod: object) -> None:
    require(mod, "receive")
    worlds = [2, 3, 2, 4, 3]
    ranks = [mod, *more_processes(mod, max(worlds) - 1)]  # 一个 rank 一个进程
    receives = [require(m, "receive") for m in ranks]
    for i, world in enumerate(worlds):
        trial(receives, world, SEED + i, n_msgs=60)


if __name__ == "__main__":
    main(run)
