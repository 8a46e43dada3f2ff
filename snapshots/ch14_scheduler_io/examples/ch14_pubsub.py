"""第 14 章的测量：PUB/SUB 的两种丢法——"迟到的订阅者"（slow joiner）和高水位，以及握手、hwm=0 之后丢多少。

发布者扮演调度器 rank 0，订阅者扮演 rank 1、rank 2（线程，各用自己的 ZMQ context 和套接字，
走真实的 ipc 套接字）。两边先各自建好套接字，再过一道"屏障"（相当于上游启动时的
sync_all_ranks），然后发布者立即以固定间隔（名义上）发 N 条消息。数每个订阅者收到了几条。
hwm_round 另量一件事：订阅者不读，PUB 按高水位丢掉多少。

    python examples/ch14_pubsub.py
"""

from __future__ import annotations

import shutil
import threading
import time

from minisgl.message import AbortBackendMsg, BaseBackendMsg
from minisgl.utils.mp import ZmqPubQueue, ZmqPullQueue, ZmqPushQueue, ZmqSubQueue, ipc_addr, new_ipc_dir

PROBE, START, READY = b"probe", b"start", b"ready"  # 握手用的原始字节，不是消息
QUIET_MS = 300  # 订阅者这么久收不到新消息，就认为发布结束了


def _subscriber(addr: str, ready_addr: str | None, connected: threading.Event,
                barrier: threading.Barrier, received: list[int]) -> None:
    sub = ZmqSubQueue(addr, create=False, decoder=BaseBackendMsg.decoder)
    ready = ZmqPushQueue(ready_addr, create=False, encoder=bytes) if ready_addr else None
    connected.set()
    barrier.wait()  # "所有 rank 都初始化完了"
    try:
        if ready is not None:  # 握手：收到一个探针 → 报告就绪 → 丢掉 START 之前的一切
            while sub.get_raw(timeout=5000) != PROBE:
                pass
            ready.put_raw(READY)
            while sub.get_raw(timeout=5000) != START:
                pass
        while True:
            try:
                received.append(sub.get(timeout=QUIET_MS).uid)
            except TimeoutError:
                return
    finally:
        sub.stop()
        if ready is not None:
            ready.stop()


def broadcast_round(n: int = 500, interval_s: float = 0.0002, subscribers: int = 2,
                    connect_first: bool = False, handshake: bool = False) -> dict:
    """跑一轮，返回每个订阅者丢了几条、丢的是不是开头的一段，以及从屏障到第一条收到的消息隔了多久。

    connect_first：订阅者先 connect、发布者后 bind（多进程启动时谁先谁后没有保证）。
    handshake：屏障之后发布者先发探针，等每个订阅者报告"收到了"，再发正式消息。
    """
    ipc_dir = new_ipc_dir()
    addr = ipc_addr(ipc_dir, "broadcast")
    ready_addr = ipc_addr(ipc_dir, "ready") if handshake else None
    barrier = threading.Barrier(subscribers + 1)
    received: list[list[int]] = [[] for _ in range(subscribers)]
    pub = ready_in = None
    threads = []

    def start_subscribers() -> None:
        for i in range(subscribers):
            connected = threading.Event()
            t = threading.Thread(target=_subscriber, args=(addr, ready_addr, connected, barrier, received[i]))
            t.start()
            connected.wait()
            threads.append(t)

    try:
        if connect_first:
            start_subscribers()
        pub = ZmqPubQueue(addr, create=True, encoder=BaseBackendMsg.encoder)
        if handshake:
            ready_in = ZmqPullQueue(ready_addr, create=True, decoder=bytes)
        if not connect_first:
            start_subscribers()
        barrier.wait()
        t0 = time.perf_counter()
        probes = 0
        if handshake:
            ready_count = 0
            while ready_count < subscribers:
                pub.put_raw(PROBE)
                probes += 1
                if ready_in.socket.poll(1):  # 1 ms 内有人报告就绪
                    ready_in.get_raw()
                    ready_count += 1
            pub.put_raw(START)
        sent_at = []
        for uid in range(n):
            sent_at.append(time.perf_counter() - t0)
            pub.put(AbortBackendMsg(uid=uid))
            time.sleep(interval_s)
        for t in threads:
            t.join(timeout=30)
    finally:
        for q in (pub, ready_in):
            if q is not None:
                q.stop()
        shutil.rmtree(ipc_dir, ignore_errors=True)
    lost = [n - len(r) for r in received]
    prefix = all(r == list(range(n - len(r), n)) for r in received)  # 丢的总是开头连续的一段
    first_ms = [sent_at[n - len(r)] * 1e3 if r else None for r in received]
    interval_ms = (sent_at[-1] - sent_at[0]) / (n - 1) * 1e3 if n > 1 else 0.0  # sleep 常比要求的久
    return {"lost": lost, "prefix": prefix, "first_ms": first_ms, "probes": probes,
            "interval_ms": interval_ms}


def hwm_round(n: int = 20_000, payload: int = 0, hwm: int | None = None) -> int:
    """订阅者握手之后不读，发布者一口气发 n 条：订阅者事后能读到几条（其余被 PUB 按高水位丢掉）。

    hwm 原样交给两端的队列：None 是 ZMQ 的默认高水位，0 是不设上限。
    """
    ipc_dir = new_ipc_dir()
    addr = ipc_addr(ipc_dir, "broadcast")
    pub = ZmqPubQueue(addr, create=True, encoder=BaseBackendMsg.encoder, hwm=hwm)
    sub = ZmqSubQueue(addr, create=False, decoder=BaseBackendMsg.decoder, hwm=hwm)
    try:
        while not sub.socket.poll(1):  # 等订阅生效（发探针直到收到一个）
            pub.put_raw(PROBE)
        while not sub.empty():
            sub.get_raw()
        for uid in range(n):
            pub.put(AbortBackendMsg(uid=uid))  # PUB 从不阻塞：队列满了就丢
        got = 0
        while True:
            try:
                sub.get_raw(timeout=QUIET_MS)
                got += 1
            except TimeoutError:
                return got
    finally:
        pub.stop()
        sub.stop()
        shutil.rmtree(ipc_dir, ignore_errors=True)


def describe(name: str, r: dict, n: int) -> str:
    parts = []
    for i, (lost, first) in enumerate(zip(r["lost"], r["first_ms"])):
        where = f"第一条收到的是屏障后 {first:.1f} ms 发出的" if first is not None else "一条也没收到"
        parts.append(f"rank {i + 1} 丢 {lost}/{n}（{where}）")
    return f"{name}：" + "；".join(parts)


if __name__ == "__main__":
    N = 500
    for name, kwargs in [("先 bind 后 connect，屏障后立即发", {}),
                         ("先 connect 后 bind，屏障后立即发", {"connect_first": True}),
                         ("先 connect 后 bind，探针握手后再发", {"connect_first": True, "handshake": True})]:
        print(describe(name, broadcast_round(N, **kwargs), N))
    print(f"订阅者不读、一口气发 20000 条：事后读到 {hwm_round()} 条")
