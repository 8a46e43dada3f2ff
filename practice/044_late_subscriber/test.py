"""练习 044 的评测：线程扮演 2–4 个 rank，每个订阅端在随机的时刻（有一次晚到 1.5 秒）才生效，
生效之前发出的帧直接丢掉，生效之后的帧按顺序送到，而且按最坏情况送：一帧要等到下一帧也发出了
（或者等满 30–120 ms）才上路，再过 0.5–4 ms（有时 10–30 ms）送到。于是听到探针的那一刻，总还有一帧在路上——
“只读掉已经到了的”不能碰运气过关。握手之后 rank 0 发 20 条真消息，每个 rank 都要一条不少、按顺序收到；
握手要在最后一个订阅生效之后不久就返回（不靠久睡）。

每个 rank 的 handshake 在它自己的子进程里（more_processes：就像真的多个 rank 进程），由评测进程的一个
线程驱动；pub、sub、all_reduce_min 都在评测进程里，你的代码调用它们就是跨进程的回调。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import collections
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_type, main, more_processes, require, short, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
WAIT_S = 5.0
RETURN_WITHIN_S = 1.0  # 最后一个订阅生效之后，握手最多再用这么久（参考答案只要几毫秒）


class Stuck(Exception):
    pass


class Sub:
    """订阅端：join_at 之前发出的帧丢掉（订阅还没生效）；之后的帧按顺序、按最坏情况送达（见模块说明）。"""

    def __init__(self, join_at: float, rng: random.Random) -> None:
        self.join_at, self.rng, self.frames = join_at, rng, collections.deque()
        self.cond = threading.Condition()
        self.pending: collections.deque = collections.deque()  # (发出的时刻, 帧)，还没上路
        threading.Thread(target=self._deliver, daemon=True).start()

    def offer(self, frame: bytes) -> None:
        with self.cond:
            if time.perf_counter() < self.join_at:
                return  # 订阅还没生效：这一帧丢了
            self.pending.append((time.perf_counter(), frame))
            self.cond.notify_all()

    def _deliver(self) -> None:  # 一帧一帧按发出的顺序放出来
        while True:
            with self.cond:
                self.cond.wait_for(lambda: self.pending)
                sent, frame = self.pending[0]
                hold = self.rng.uniform(0.03, 0.12)
                # 最坏情况：下一帧发出之前，这一帧一直压着（最多 hold 秒，保证总能送到）
                self.cond.wait_for(lambda: len(self.pending) > 1, timeout=max(0.0, sent + hold - time.perf_counter()))
                self.pending.popleft()
                delay = self.rng.uniform(0.0005, 0.004) if self.rng.random() < 0.7 else self.rng.uniform(0.01, 0.03)
            time.sleep(delay)
            with self.cond:
                self.frames.append(frame)
                self.cond.notify_all()

    def empty(self) -> bool:
        with self.cond:
            return not self.frames

    def get(self, timeout: float = WAIT_S) -> bytes:
        with self.cond:
            if not self.cond.wait_for(lambda: self.frames, timeout=timeout):
                raise Stuck("sub.get() 等了几秒也没有等到下一帧")
            return self.frames.popleft()

    def collect(self, n: int) -> list[bytes]:
        """评测用：最多收 n 帧，等不到就停（丢了的帧永远不会来）。"""
        out = []
        try:
            while len(out) < n:
                out.append(self.get(timeout=1.0))
        except Stuck:
            pass
        return out


class Pub:
    def __init__(self, subs: list[Sub]) -> None:
        self.subs, self.count = subs, 0

    def put(self, frame: bytes) -> None:
        check_type(frame, bytes, "pub.put 的参数")
        self.count += 1
        for sub in self.subs:
            sub.offer(frame)


class AllReduceMin:
    def __init__(self, world: int) -> None:
        self.barrier = threading.Barrier(world, timeout=WAIT_S)
        self.values: dict[int, int] = {}
        self.calls = [0] * world

    def __call__(self, rank: int, value: int) -> int:
        check_type(value, int, "all_reduce_min 的参数")
        self.calls[rank] += 1
        try:
            self.values[rank] = value
            self.barrier.wait()
            result = min(self.values.values())
            self.barrier.wait()
            return result
        except threading.BrokenBarrierError:
            raise Stuck("all_reduce_min 等不齐所有 rank：有的 rank 没来，或者来的次数不同") from None


REAL = [f"msg-{i}".encode() for i in range(20)]


def trial(handshakes, world: int, delays: list[float], rng: random.Random) -> None:
    start = time.perf_counter()
    subs = [Sub(start + d, random.Random(rng.random())) for d in delays]  # rank 1 .. world-1
    pub, reduce = Pub(subs), AllReduceMin(world)
    got: dict[int, list[bytes]] = {}
    returned: dict[int, float] = {}
    errors: list = []

    def rank_main(rank: int) -> None:
        try:
            handshakes[rank](rank, pub if rank == 0 else None, None if rank == 0 else subs[rank - 1],
                      lambda v: reduce(rank, v))
            returned[rank] = time.perf_counter()
            reduce(rank, 0)  # 评测自己的同步：所有 rank 都握完手，rank 0 才发真消息
            if rank == 0:
                for frame in REAL:
                    pub.put(frame)
            else:
                got[rank] = subs[rank - 1].collect(len(REAL))
        except NotImplementedError:
            errors.append(NotImplementedError)
        except Stuck as e:
            errors.append(f"rank {rank}：{e}")
        except Exception as e:  # noqa: BLE001
            errors.append(f"rank {rank} 出错：{type(e).__name__}: {e}")
        except BaseException as e:  # noqa: BLE001 - 这个 rank 的进程没了、卡住了（超过了墙钟时间的兜底）
            errors.append(e)  # 交给主线程重新抛出：结论是“超时”或“进程没了”

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for e in errors:
        if isinstance(e, BaseException):
            raise e
    if NotImplementedError in errors:
        raise NotImplementedError("handshake 还没写完")
    setting = f"{world} 个 rank，订阅分别在 {', '.join(f'{d * 1000:.0f}' for d in delays)} ms 时生效"
    check(not any(t.is_alive() for t in threads), f"{setting}：有的 rank 卡住了")
    for rank, frames in sorted(got.items()):
        if frames != REAL and frames and frames[0] != REAL[0] and frames[0][:1] == b"\x00":
            check(False, f"{setting}：rank {rank} 握手之后收到的第一帧是 {short(frames[0])}，不是真消息"
                         "——握手用的帧要在 handshake 里读掉")
    check(not errors, f"{setting}：" + "；".join(str(e) for e in errors[:3]))
    for rank, frames in sorted(got.items()):
        missing = [m for m in REAL if m not in frames]
        check(not missing, f"{setting}：rank {rank} 丢了 {len(missing)} 条真消息（比如 {short(missing[:3])}）"
                           "——握手返回时它的订阅还没生效")
        check(frames == REAL, f"{setting}：rank {rank} 收到的真消息 {short(frames)} 顺序不对或混进了别的帧")
    late = max(returned.values()) - (start + max(delays))
    check(late <= RETURN_WITHIN_S, f"{setting}：最后一个订阅生效 {late:.1f} 秒之后握手才返回——"
                                   "要确认订阅生效了就结束，而不是睡一段固定的长时间")


def run(mod: object) -> None:
    require(mod, "handshake")
    handshakes = [require(m, "handshake") for m in [mod, *more_processes(mod, 3)]]  # 一个 rank 一个进程
    rng = random.Random(SEED)
    trial(handshakes, 2, [0.0], rng)
    trial(handshakes, 2, [1.5], rng)  # 订阅多久生效没有上限：这一次晚到 1.5 秒
    for world in (3, 4, 2):
        trial(handshakes, world, [rng.uniform(0, 0.15) for _ in range(world - 1)], rng)


if __name__ == "__main__":
    main(run)
