"""进程间的消息队列：pyzmq 套接字 + msgpack 编码。

每个队列包一个 ZMQ 套接字，一端 ``create=True``（bind，创建地址），另一端 ``create=False``
（connect）。本书的约定：**收件方 bind**（PULL），发件方 connect（PUSH），因为收件方是长期存在、
地址固定的那一个；唯一的例外是 PUB/SUB 广播，由发件的 PUB 一方 bind。

- put(obj)：encoder(obj) → 字典 → msgpack 字节 → 发送；put_raw(bytes) 直接发已经编码好的字节。
- get()：收一帧 → msgpack 解码 → decoder(字典) → 消息对象；get_raw() 只收字节，decode() 再解码。
- get(timeout=毫秒)：这么久没收到就抛 TimeoutError；不给 timeout 就一直等。
- empty()：现在有没有可以立刻收的消息（不阻塞）。
- PUB/SUB 可以给 hwm（高水位，条）：None 用 ZMQ 的默认值 1000，0 = 不设上限；
  PUB 到了上限直接丢掉新消息，所以一步可能转发很多条的地方要给 0。
- stop()：关套接字；还没发出去的消息最多再等 LINGER_MS 毫秒，对端不在也不会卡死。

地址用 ``ipc://<目录>/<名字>``（Unix 域套接字文件）；目录由 new_ipc_dir() 为每个服务新建，
所以同一台机器上的两个服务互不干扰。
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Generic, TypeVar

import msgpack
import zmq
import zmq.asyncio

T = TypeVar("T")

LINGER_MS = 1000  # stop() 时为没发完的消息最多再等多久
# Unix 域套接字的路径有长度上限（sockaddr_un.sun_path：Linux 108 字节、macOS 104 字节，含结尾 0）
MAX_IPC_PATH_BYTES = 103


def new_ipc_dir() -> str:
    """为一个服务新建放 IPC 套接字文件的临时目录（用完由调用方 shutil.rmtree 删掉）。"""
    return tempfile.mkdtemp(prefix="minisgl-")


def ipc_addr(ipc_dir: str, name: str) -> str:
    """目录里名为 name 的 IPC 地址，例如 ipc:///tmp/minisgl-abc123/backend。"""
    path = os.path.join(ipc_dir, name)
    if len(path.encode()) > MAX_IPC_PATH_BYTES:
        raise ValueError(f"IPC 套接字路径太长（{len(path.encode())} 字节，上限 {MAX_IPC_PATH_BYTES}）："
                         f"{path}；请把 TMPDIR 设成更短的目录")
    return f"ipc://{path}"


def pack(encoder: Callable[[Any], dict], obj: Any) -> bytes:
    """消息对象 → 发送用的字节。use_bin_type：bytes 与 str 在线上是两种类型，解码时不会混淆。"""
    return msgpack.packb(encoder(obj), use_bin_type=True)


def unpack(decoder: Callable[[Any], T], raw: bytes) -> T:
    """收到的字节 → 消息对象；字节不是合法的 msgpack 时给出中文错误。"""
    try:
        data = msgpack.unpackb(raw, raw=False)
    except Exception as e:  # msgpack 对坏数据会抛好几种异常，统一成一种
        detail = str(e) or type(e).__name__
        raise ValueError(f"收到的 {len(raw)} 字节不是合法的 msgpack 消息（{detail}）") from e
    return decoder(data)


class _ZmqEndpoint:
    """一个套接字的创建、bind/connect 与关闭；具体队列只加收发方法。"""

    def __init__(self, addr: str, create: bool, socket_type: int, asynchronous: bool = False,
                 subscribe: bool = False, hwm: int | None = None):
        self.addr = addr
        self.context = zmq.asyncio.Context() if asynchronous else zmq.Context()
        self.socket = self.context.socket(socket_type)
        self.socket.setsockopt(zmq.LINGER, LINGER_MS)
        if hwm is not None:  # 高水位只对之后建立的连接生效，所以必须在 bind/connect 之前设
            self.socket.setsockopt(zmq.SNDHWM if socket_type == zmq.PUB else zmq.RCVHWM, hwm)
        if subscribe:  # SUB 默认什么都不收；订阅空前缀 = 收全部（在 connect 之前订阅）
            self.socket.setsockopt(zmq.SUBSCRIBE, b"")
        try:
            self.socket.bind(addr) if create else self.socket.connect(addr)
        except zmq.ZMQError as e:
            self.stop()
            action = "bind" if create else "connect"
            raise RuntimeError(f"无法 {action} 地址 {addr}：{e}") from e

    def stop(self) -> None:
        if not self.socket.closed:
            self.socket.close()
            self.context.term()


class _Receiver(_ZmqEndpoint):
    decoder: Callable[[Any], Any]

    def get_raw(self, timeout: int | None = None) -> bytes:
        if timeout is not None and self.socket.poll(timeout) == 0:
            raise TimeoutError(f"{timeout} 毫秒内没有从 {self.addr} 收到消息")
        return self.socket.recv()

    def get(self, timeout: int | None = None):
        return unpack(self.decoder, self.get_raw(timeout))

    def decode(self, raw: bytes):
        return unpack(self.decoder, raw)

    def empty(self) -> bool:
        return self.socket.poll(timeout=0) == 0


class _Sender(_ZmqEndpoint):
    encoder: Callable[[Any], dict]

    def put_raw(self, raw: bytes) -> None:
        self.socket.send(raw, copy=False)

    def put(self, obj) -> None:
        self.put_raw(pack(self.encoder, obj))


class ZmqPushQueue(_Sender, Generic[T]):
    """发件端（PUSH）。通常 create=False：connect 到收件方 bind 的地址。"""

    def __init__(self, addr: str, create: bool, encoder: Callable[[T], dict]):
        super().__init__(addr, create, zmq.PUSH)
        self.encoder = encoder


class ZmqPullQueue(_Receiver, Generic[T]):
    """收件端（PULL）。通常 create=True：收件方 bind 地址，多个发件方都可以 connect 进来。"""

    def __init__(self, addr: str, create: bool, decoder: Callable[[Any], T]):
        super().__init__(addr, create, zmq.PULL)
        self.decoder = decoder


class ZmqPubQueue(_Sender, Generic[T]):
    """广播发件端（PUB，bind）：每条消息发给当时已经连上的所有 SUB；没有 SUB 就直接丢掉。

    hwm：给每个 SUB 排队的上限（条），到了上限新消息也直接丢掉；None 用默认 1000，0 不设上限。
    """

    def __init__(self, addr: str, create: bool, encoder: Callable[[T], dict], hwm: int | None = None):
        super().__init__(addr, create, zmq.PUB, hwm=hwm)
        self.encoder = encoder


class ZmqSubQueue(_Receiver, Generic[T]):
    """广播收件端（SUB，connect）。连上之前发出的消息收不到（"迟到的订阅者"，第 14 章量给你看）。

    hwm：接收队列的上限（条），含义同 ZmqPubQueue；要一条不丢，两端都给 0。
    """

    def __init__(self, addr: str, create: bool, decoder: Callable[[Any], T], hwm: int | None = None):
        super().__init__(addr, create, zmq.SUB, subscribe=True, hwm=hwm)
        self.decoder = decoder


class ZmqAsyncPushQueue(_ZmqEndpoint, Generic[T]):
    """asyncio 版的 PUSH：在事件循环里 ``await q.put(msg)``，不阻塞其他协程。"""

    def __init__(self, addr: str, create: bool, encoder: Callable[[T], dict]):
        super().__init__(addr, create, zmq.PUSH, asynchronous=True)
        self.encoder = encoder

    async def put_raw(self, raw: bytes) -> None:
        await self.socket.send(raw, copy=False)

    async def put(self, obj: T) -> None:
        await self.put_raw(pack(self.encoder, obj))


class ZmqAsyncPullQueue(_ZmqEndpoint, Generic[T]):
    """asyncio 版的 PULL：``await q.get()`` 等消息时事件循环照常处理别的协程。"""

    def __init__(self, addr: str, create: bool, decoder: Callable[[Any], T]):
        super().__init__(addr, create, zmq.PULL, asynchronous=True)
        self.decoder = decoder

    async def get_raw(self) -> bytes:
        return await self.socket.recv()

    async def get(self) -> T:
        return unpack(self.decoder, await self.get_raw())

    def decode(self, raw: bytes) -> T:
        return unpack(self.decoder, raw)
