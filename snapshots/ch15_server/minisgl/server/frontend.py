"""前端管理器：API server 和 shell 共用的那一半，不依赖 FastAPI。

它给每个请求编一个 uid，把 TokenizeMsg 发给 tokenizer 进程，在后台收 tokenizer 进程推回的
UserReply，按 uid 放进各自的队列；后端退出或卡住时让每个在等的请求立刻知道。
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from minisgl.core import SamplingParams
from minisgl.message import (
    AbortMsg,
    BaseFrontendMsg,
    BaseTokenizerMsg,
    BatchFrontendMsg,
    TokenizeMsg,
    UserReply,
)
from minisgl.utils import init_logger

logger = init_logger(__name__)


@dataclass(frozen=True)
class ServedModel:
    """/v1/models 里的那一个模型，以及没给 max_tokens 时用多少。"""

    name: str
    path: str
    max_seq_len: int  # 提示 + 生成最多多少个 token（调度器就绪时报上来的）

    @property
    def default_max_tokens(self) -> int:
        """chat 不给 max_tokens：能生成多少就生成多少（tokenizer 进程截到 max_seq_len − 提示长度）。"""
        return self.max_seq_len


class BackendUnavailable(Exception):
    """后端（调度器或 tokenizer 进程）已经退出，请求不可能再有回复。"""


@dataclass(frozen=True)
class _BackendDown:
    """放进每个等待中请求的队列：叫醒它，告诉它后端没了（不然它会一直等）。"""

    reason: str


class FrontendManager:
    """API server 和 tokenizer 进程之间的那一层：编 uid、发请求、把回复按 uid 分给等待的协程。

    send：推给 tokenizer 进程的队列（ZmqAsyncPushQueue）；recv：从 "frontend" 地址收回复的队列
    （ZmqAsyncPullQueue，API server 绑定）。一个后台任务不停地收，按 uid 放进各自的 asyncio.Queue。
    """

    def __init__(self, send, recv, watchdog_timeout: float | None = None) -> None:
        self.send, self.recv = send, recv
        self.uid_counter = 0
        self.reply_queues: dict[int, asyncio.Queue] = {}  # 还在等回复的请求
        self.backend_error: str | None = None  # 后端退出的原因；None 表示都活着
        self.died = asyncio.Event()  # backend_died 之后置位：API server 据此停下
        self.accepting = True  # 停服务时置 False：不收新请求
        self.watchdog_timeout = watchdog_timeout  # None：不看守（见 _watchdog）
        self.last_heard = time.monotonic()  # 最近一次收到后端的消息（或开始有请求在等）的时刻
        self._listener: asyncio.Task | None = None
        self._watchdog_task: asyncio.Task | None = None
        self._background: set[asyncio.Task] = set()  # 发出去的取消消息，留个引用免得被回收

    def start(self) -> None:
        self._listener = asyncio.get_running_loop().create_task(self._listen())
        if self.watchdog_timeout is not None:
            self._watchdog_task = asyncio.get_running_loop().create_task(self._watchdog())

    async def _watchdog(self) -> None:
        """有请求在等、后端却 watchdog_timeout 秒一点回复都没有：当它卡住了（被 SIGSTOP、死锁……）。

        进程还在，看守子进程的线程发现不了；等待的请求会永远等下去。在跑的请求每一步都有回复，
        服务的默认设置下一步 prefill 也只算一小块，所以这么长的沉默只能是后端出了事：
        当成后端死了（等待的请求得到 503，服务器退出）。
        """
        while self.backend_error is None:
            await asyncio.sleep(min(1.0, self.watchdog_timeout / 4))
            silent = time.monotonic() - self.last_heard
            if self.reply_queues and silent > self.watchdog_timeout:
                self.backend_died(f"有 {len(self.reply_queues)} 个请求在等，后端 {silent:.0f} 秒"
                                  "没有任何回复（调度器或 tokenizer 进程卡住了）")

    async def _listen(self) -> None:
        try:
            while True:
                msg = await self.recv.get()
                self.last_heard = time.monotonic()
                for reply in _unwrap(msg):
                    queue = self.reply_queues.get(reply.uid)
                    if queue is not None:  # 找不到：客户端已经放弃了这个请求，回复直接丢掉
                        queue.put_nowait(reply)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # 收坏了就再也收不到任何回复：当成后端出错，让等待者立刻失败
            logger.exception("API server 收回复时出错")
            self.backend_died(f"API server 收回复时出错：{e!r}")

    async def submit(self, text: str | list[dict[str, str]], params: SamplingParams,
                     stop: list[str], skip_special_tokens: bool = False) -> int:
        """发出一个请求，返回它的 uid。后端已经退出时立刻抛 BackendUnavailable。"""
        if self.backend_error is not None:
            raise BackendUnavailable(self.backend_error)
        if not self.accepting:
            raise BackendUnavailable("服务器正在停止")
        uid = self.uid_counter
        self.uid_counter += 1
        if not self.reply_queues:  # 从空闲变成有请求在等：沉默从现在算起
            self.last_heard = time.monotonic()
        self.reply_queues[uid] = asyncio.Queue()  # 先建队列再发：回复不会比队列先到
        try:
            await self.send.put(TokenizeMsg(uid=uid, text=text, sampling_params=params, stop=stop,
                                            skip_special_tokens=skip_special_tokens))
        except BaseException:  # 没发出去（被取消、编码失败）：别留下一个永远没人取的队列
            self.reply_queues.pop(uid, None)
            raise
        return uid

    async def next_reply(self, uid: int) -> UserReply:
        """等 uid 的下一段回复。最后一段（finished=True）取走后，这个 uid 就不再登记。"""
        item = await self.reply_queues[uid].get()
        if isinstance(item, _BackendDown):
            self.reply_queues.pop(uid, None)
            raise BackendUnavailable(item.reason)
        if item.finished:
            del self.reply_queues[uid]
        return item

    def abort(self, uid: int) -> None:
        """客户端不要这个请求了：不再收它的回复，并让后端停下它、还回它的 KV 页。

        不用 await：它常在一个刚被取消的协程的 finally 里调用，那里再 await 会被再次取消。
        """
        if self.reply_queues.pop(uid, None) is None:
            return  # 已经正常结束，没什么可取消的
        logger.info("客户端断开，取消请求 %d", uid)
        if self.backend_error is None:
            task = asyncio.get_running_loop().create_task(self.send.put(AbortMsg(uid=uid)))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def drain(self, seconds: float) -> None:
        """服务器要停了：新请求立刻 503；正在生成的最多再等 seconds 秒，到时叫醒它们、让它们收尾。"""
        loop = asyncio.get_running_loop()
        loop.call_later(seconds, self._fail_all, f"服务器正在停止（已等了 {seconds} 秒）")
        self.accepting = False
        if self.reply_queues:
            logger.info("服务器正在停止：%d 个请求还在生成，最多再等 %s 秒", len(self.reply_queues), seconds)

    def backend_died(self, reason: str) -> None:
        """某个后端进程退出了（由启动器的看守线程经事件循环调用）：叫醒所有等待者。"""
        if self.backend_error is None:
            logger.error("%s；之后的请求都会立刻得到 503", reason)
        self._fail_all(reason)
        self.died.set()

    def _fail_all(self, reason: str) -> None:
        if self.backend_error is not None:
            return
        self.backend_error = reason
        for queue in self.reply_queues.values():
            queue.put_nowait(_BackendDown(reason))

    async def shutdown(self) -> None:
        if self._background:  # 还没发完的取消消息先发完，再关套接字
            await asyncio.wait(list(self._background), timeout=1.0)
        for task in (self._listener, self._watchdog_task):
            if task is not None:
                task.cancel()
        self.send.stop()
        self.recv.stop()


def _unwrap(msg: BaseFrontendMsg) -> list[UserReply]:
    if isinstance(msg, BatchFrontendMsg):
        return [m for inner in msg.data for m in _unwrap(inner)]
    assert isinstance(msg, UserReply), f"API server 只应收到 UserReply，收到 {type(msg).__name__}"
    return [msg]


def connect_frontend(frontend_addr: str, tokenizer_addr: str,
                     watchdog_timeout: float | None = None) -> FrontendManager:
    """建 ZMQ 队列：绑定自己的 "frontend"（PULL），连到 tokenizer 进程的地址（PUSH）。要在事件循环里调用。"""
    from minisgl.utils.mp import ZmqAsyncPullQueue, ZmqAsyncPushQueue

    recv = ZmqAsyncPullQueue(frontend_addr, create=True, decoder=BaseFrontendMsg.decoder)
    send = ZmqAsyncPushQueue(tokenizer_addr, create=False, encoder=BaseTokenizerMsg.encoder)
    return FrontendManager(send, recv, watchdog_timeout)
