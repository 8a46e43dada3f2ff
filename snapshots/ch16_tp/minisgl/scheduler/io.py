"""SchedulerIO：服务模式下调度器的收与发。

每个 TP rank 一个调度器进程，各自拼批、各自前向；要算出同样的批，它们每一步必须看到
同样的消息。所以只有 rank 0 和外界打交道：

    收  rank 0 从 "backend"（PULL）取走这一步到达的全部消息，把原始字节原样转发到
        "broadcast"（PUB），再经 gloo 进程组广播"这一步有几条"；其他 rank 从 SUB 正好
        取这么多条。于是每个 rank 在同一步处理同样的消息，顺序也一样。
    发  只有 rank 0 把结果（DetokenizeMsg / RejectMsg）发回 tokenizer 进程；其他 rank 的
        结果一模一样，丢掉即可。

没有事可做时（blocking=True）先做空闲时的事（on_idle：核对 KV 页），再阻塞地等第一条
消息。这时各 rank 都停在 ZMQ 上等，而不是停在 gloo 的广播里：gloo 的集合通信有超时，
一个空闲了半小时的服务不该因此崩掉。等到的第一条不计入广播的条数，各 rank 都知道它一定
会来；blocking 本身由 runnable 决定，各 rank 的状态相同，所以它们同时阻塞、同时醒来。

只有一个 rank 时没有进程组，也没有 PUB/SUB。
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

import torch
import torch.distributed as dist

from minisgl.distributed import DistributedInfo
from minisgl.message import (
    BaseBackendMsg,
    BaseTokenizerMsg,
    BatchTokenizerMsg,
    DetokenizeMsg,
    RejectMsg,
)
from minisgl.utils.mp import ZmqPubQueue, ZmqPullQueue, ZmqPushQueue, ZmqSubQueue

if TYPE_CHECKING:
    from .config import SchedulerConfig

# 握手用的两种帧。真正的消息是 msgpack 编码的字典，第一个字节不会是 b"\x00"，不会和它们混淆
_PROBE = b"\x00probe"  # 探针："有人听得到吗"
_READY = b"\x00ready"  # "都听到了，下一帧起是真消息"


class SchedulerIO:
    """一个调度器 rank 的收发。rank 0 连外界；其他 rank 只从 rank 0 收。"""

    def __init__(self, config: SchedulerConfig, tp_info: DistributedInfo,
                 cpu_group: dist.ProcessGroup | None = None) -> None:
        """cpu_group：多 rank 时商定条数用的 gloo 组（Engine.tp_cpu_group）。"""
        if tp_info.size > 1 and cpu_group is None:
            raise ValueError(f"{tp_info.size} 个 rank 需要一个 gloo 进程组来商定每一步的消息条数")
        self.tp_info = tp_info
        self.cpu_group = cpu_group if tp_info.size > 1 else None
        self._pull = self._push = self._pub = self._sub = None
        if tp_info.is_primary():
            self._pull = ZmqPullQueue(config.zmq_backend_addr, create=True,
                                      decoder=BaseBackendMsg.decoder)
            self._push = ZmqPushQueue(config.zmq_detokenizer_addr, create=False,
                                      encoder=BaseTokenizerMsg.encoder)
        if tp_info.size > 1:
            # hwm=0：一步转发的帧可能超过默认高水位 1000（一大批请求同时到达），PUB 到了高水位
            # 会直接丢帧，其他 rank 就按条数等一条永远不来的帧；宁可让帧在内存里排队
            if tp_info.is_primary():
                self._pub = ZmqPubQueue(config.zmq_scheduler_broadcast_addr, create=True,
                                        encoder=BaseBackendMsg.encoder, hwm=0)
            else:
                self._sub = ZmqSubQueue(config.zmq_scheduler_broadcast_addr, create=False,
                                        decoder=BaseBackendMsg.decoder, hwm=0)
            self._wait_for_subscribers()

    # ------------------------------------------------------------------ 收

    def receive_msg(self, blocking: bool = False,
                    on_idle: Callable[[], None] | None = None) -> list[BaseBackendMsg]:
        """这一步要处理的消息（每个 rank 得到同样的列表）。

        blocking=True：先调用 on_idle，再等到至少一条消息；False：有几条取几条，可能为空。
        """
        if blocking and on_idle is not None:
            on_idle()
        if self._sub is not None:
            raws = self._receive_from_rank0(blocking)
        else:
            raws = self._receive_from_tokenizer(blocking)
        return [self._decode(raw) for raw in raws]

    def _receive_from_tokenizer(self, blocking: bool) -> list[bytes]:
        """rank 0：取走已经到达的全部消息，转发给其他 rank，再广播条数。"""
        assert self._pull is not None
        first = [self._pull.get_raw()] if blocking else []
        rest = []
        while not self._pull.empty():
            rest.append(self._pull.get_raw())
        if self._pub is not None:
            for raw in first + rest:  # 先转发：其他 rank 收到条数后，要的字节已经在路上
                self._pub.put_raw(raw)
            self.agree_count(len(rest))
        return first + rest

    def _receive_from_rank0(self, blocking: bool) -> list[bytes]:
        """rank ≥ 1：和 rank 0 同时阻塞地等第一条；其余的按广播来的条数取。"""
        assert self._sub is not None
        first = [self._sub.get_raw()] if blocking else []
        count = self.agree_count(0)
        return first + [self._sub.get_raw() for _ in range(count)]

    def agree_count(self, count: int) -> int:
        """rank 0 的 count 经 gloo 广播给所有 rank，返回它（其他 rank 传进来的值被覆盖）。"""
        box = torch.tensor([count], dtype=torch.int64)
        dist.broadcast(box, src=0, group=self.cpu_group)
        return int(box.item())

    def _decode(self, raw: bytes) -> BaseBackendMsg:
        queue = self._pull if self._pull is not None else self._sub
        return queue.decode(raw)

    # ------------------------------------------------------------------ 发

    def send_result(self, replies: list[DetokenizeMsg | RejectMsg]) -> None:
        """把这一步的结果发回 tokenizer 进程；只有 rank 0 发，多条打成一个包。"""
        if self._push is None or not replies:
            return
        self._push.put(replies[0] if len(replies) == 1 else BatchTokenizerMsg(data=list(replies)))

    # ------------------------------------------------------------------ 同步与关闭

    def sync_all_ranks(self) -> None:
        """所有 rank 在这里碰头（例如退出前），单 rank 时什么都不做。"""
        if self.cpu_group is not None:
            dist.barrier(group=self.cpu_group)

    def stop(self) -> None:
        for queue in (self._pull, self._push, self._pub, self._sub):
            if queue is not None:
                queue.stop()

    def _wait_for_subscribers(self, poll_s: float = 0.005) -> None:
        """PUB/SUB 的"迟到的订阅者"：SUB 的订阅传到 PUB 之前，PUB 发出的帧直接丢掉。

        connect 返回时订阅未必已经生效，所以不能只靠"先连上再开始"。这里一轮一轮地握手：
        rank 0 发一个 _PROBE，所有 rank 用 all_reduce(MIN) 报告"听到过没有"，直到人人都听到；
        然后 rank 0 发 _READY，其他 rank 读掉之前的 _PROBE 直到 _READY。订阅一旦生效，之后
        的帧按发出的顺序送达，高水位设成了 0 也不会丢，所以 _READY 之后的第一帧就是第一条真消息。
        """
        heard = self._sub is None  # rank 0 自己不用听
        while True:
            if self._pub is not None:
                self._pub.put_raw(_PROBE)
            if not heard:
                time.sleep(poll_s)  # 给这一轮的 _PROBE 一点在路上的时间
                heard = not self._sub.empty()
            everyone = torch.tensor([int(heard)], dtype=torch.int64)
            dist.all_reduce(everyone, op=dist.ReduceOp.MIN, group=self.cpu_group)
            if everyone.item() == 1:
                break
        if self._pub is not None:
            self._pub.put_raw(_READY)
        else:
            while self._sub.get_raw() != _READY:
                pass

