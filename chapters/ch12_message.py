# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 第 12 章 消息、序列化与 ZMQ
#
# 到第 11 章为止，请求从 `LLM.generate` 进去、结果从它出来，全在一个进程里。服务要拆成几个进程：API server 收 HTTP，tokenizer 进程分词和反分词，调度器跑模型，它们之间只能传字节。本章写三样东西：进程之间的消息类，把消息变成字节的[序列化](../glossary.md#serialization)（msgpack 加[类型标签](../glossary.md#type-tag)，bfloat16 张量也一个比特不差），以及包在 pyzmq 外面的队列。测量会说清楚 msgpack 比 pickle 贵在哪里、省在哪里，以及广播在启动时会丢几条消息、怎样做到一条不丢。

# %% tags=["remove-cell"]
from minibook.page import *
setup(12)

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 解码器收到 `{"__type__": "某个名字", ...}`，为什么只在一张白名单里找这个类，不去模块里按名字找？
# 2. numpy 没有 bfloat16，一个 bfloat16 张量怎样变成字节、再一个比特不差地变回来？
# 3. 本书约定一对 PUSH/PULL 里谁 bind、谁 connect？广播为什么反过来？
# 4. SUB 连上之前 PUB 发出的消息去了哪里？启动时怎样保证一条不丢？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 字节来自另一个进程，标签写什么都有可能；按名字到处找，等于让发件方决定在收件方构造什么对象。白名单里只有这一族的消息类和 `SamplingParams`，表外的标签一律报错。
#     2. 先 `view` 成同样 16 位宽的 int16（比特不变，只是换个解释），int16 numpy 认得，取出字节；收到后按 int16 读回，再 `view` 回 bfloat16。
#     3. 收件方 bind：它长期存在、地址固定，发件方可以有好几个、随时 connect 进来。这是本书的约定，不是 ZMQ 的规定，哪一端 bind 都能通信。广播只有一个发件方（rank 0），却有好几个收件方，所以由发件的 PUB 一方 bind。
#     4. 直接丢掉：PUB 只发给发送那一刻已经订阅上的 SUB。启动时发布者先发探针，等每个订阅者都报告收到过一个，再发正式消息；订阅者丢掉正式消息之前的一切。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章只新建文件：`minisgl/message/` 下的三族消息和编码工具，`minisgl/utils/mp.py` 里的队列（`utils/__init__.py` 不变，用的时候写 `from minisgl.utils.mp import ...`）。`examples/` 下是 main 和两个测量脚本。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch12_message.py`：本进程扮演 tokenizer，用 spawn 起一个子进程扮演调度器，把三个 `UserMsg` 装进一个 `BatchBackendMsg` 推过去；子进程把每个请求的 token 逐个作为 `DetokenizeMsg` 推回来，最后核对一个不差。`python tools/steps.py check 12` 会跑它和本章的测试；只想跑 main 或者测量：
#
# ```bash
# python tools/steps.py run 12 -- python examples/ch12_message.py
# python tools/steps.py run 12 -- python examples/ch12_wire.py     # msgpack 对 pickle
# python tools/steps.py run 12 -- python examples/ch12_pubsub.py   # 迟到的订阅者
# ```
#
# 第 15 章把四类进程组装成服务，本章先把它们之间的线接好：
#
# ![四个方框：API server（主进程，asyncio）、tokenizer 进程、调度器 rank 0、调度器 rank 1 到 n-1。API server 向 tokenizer 发 TokenizeMsg 和 AbortMsg，收 UserReply；tokenizer 向 rank 0 发 UserMsg、ExitMsg、AbortBackendMsg，收 DetokenizeMsg 和 RejectMsg；rank 0 用 PUB 把收到的字节原样转发给其他 rank 的 SUB。每个收件箱由收件方 bind（实心圆），发件方 connect（空心圆），广播由 PUB 一方 bind；四个地址 frontend、tokenizer、backend、broadcast 都在每个服务自己的临时目录里](../assets/ch12_processes.svg)
#
# ## 先看问题：对象过不了进程边界
#
# 一个 `UserMsg` 是 dataclass，里面有一个张量和一个 `SamplingParams`。msgpack 只认识 None、bool、int、float、str、bytes、list、dict，直接交给它：

# %%
import msgpack
import torch

from minisgl.core import SamplingParams
from minisgl.message import UserMsg

msg = UserMsg(uid=7, input_ids=torch.tensor([9906, 11, 1917], dtype=torch.int32),
              sampling_params=SamplingParams(temperature=0.7, max_tokens=64))
try:
    msgpack.packb(msg)
except TypeError as error:
    print("msgpack.packb(UserMsg)：TypeError:", error)

# %% [markdown]
# pickle 倒是什么都能装，可它装得太多了：收件方 `pickle.loads` 时，字节里写着调用哪个函数、传什么参数，它就照做。一条“消息”可以让收件进程执行任意代码：

# %%
import pickle


class NotAMessage:
    def __reduce__(self):  # pickle 据此记下“还原时调用 print(...)”，换成 os.system 也一样
        return (print, ("收件方执行了发件方指定的函数",))


payload = pickle.dumps(NotAMessage())
print(f"{len(payload)} 字节，里面有函数名：{b'print' in payload}")
restored = pickle.loads(payload)
print("还原出来的对象：", restored)

# %% [markdown]
# 用 pickle 时，进程之间的一个端口、一个套接字文件，只要别人能往里写，就能让收件进程做任何事。我们要的格式只能描述数据，不能描述动作。
#
# ## 拍平：类型标签加字段
#
# 发送前把消息拍平成 msgpack 认识的结构：dataclass 写成 `{"__type__": 类名, 字段: 值}`，字段值递归处理；一维 CPU 张量写成 `{"__type__": "Tensor", "buffer": 原始字节, "dtype": 类型名}`。

# %% tags=["remove-input"]
listing("minisgl/message/utils.py", "serialize_type")

# %% tags=["remove-input"]
listing("minisgl/message/utils.py", "deserialize_type")

# %% [markdown]
# 解码时只查调用方给的表 `cls_map`，表外的标签报错；构造仍然经过类自己的 `__init__`，所以 `SamplingParams` 收到的坏参数在收件方会被再检查一遍。看一条 `UserMsg` 拍平之后的样子：

# %%
from minisgl.message import BaseBackendMsg
from minisgl.utils.mp import pack, unpack

flat = msg.encoder()
print(flat)
raw = pack(BaseBackendMsg.encoder, msg)
back = unpack(BaseBackendMsg.decoder, raw)
print(f"msgpack 之后 {len(raw)} 字节；还原：{back}")
assert back.input_ids.tolist() == msg.input_ids.tolist() and back.sampling_params == msg.sampling_params

# %% [markdown]
# 3 个 int32 的 token 正好是 12 个字节的 `buffer`。`pack` 用了 `use_bin_type=True`：`bytes` 和 `str` 在线上是两种类型，解码后 `buffer` 仍是 `bytes`、类名仍是 `str`。
#
# ### bfloat16：借 int16 搬运比特
#
# 张量变字节最顺手的写法是 `t.numpy().tobytes()`，可 numpy 没有 bfloat16：

# %%
import numpy as np

bf16 = torch.tensor([1.0, -2.0, 3.140625], dtype=torch.bfloat16)
try:
    bf16.numpy()
except TypeError as error:
    print("bf16.numpy()：TypeError:", error)
print("numpy 里有 bfloat16 吗：", hasattr(np, "bfloat16"))

# %% [markdown]
# bfloat16 和 int16 都是 16 位：`view(torch.int16)` 不改任何一个比特，只换个解释，numpy 就认得了。收件方按 int16 读出字节，再 `view` 回 bfloat16。

# %% tags=["remove-input"]
listing("minisgl/message/utils.py", "_tensor_to_dict")

# %% tags=["remove-input"]
listing("minisgl/message/utils.py", "_tensor_from_dict")

# %%
from minisgl.message import deserialize_type, serialize_type

wire = serialize_type(bf16)
print("线上的字节：", wire["buffer"].hex(" ", 2), " dtype:", wire["dtype"])
again = deserialize_type({}, msgpack.unpackb(msgpack.packb(wire, use_bin_type=True)))
print("还原：", again, " 比特相同：", torch.equal(again.view(torch.int16), bf16.view(torch.int16)))
assert again.dtype == torch.bfloat16 and torch.equal(again.view(torch.int16), bf16.view(torch.int16))

# %% [markdown]
# 1.0 的 bfloat16 是 `0x3F80`，小端写成 `80 3f`。表里允许的类型是一张固定的清单，收到不认识的 `dtype` 名字就报错，不会拿它去 `getattr(np, ...)`。
#
# ### 每一族的解码器只认自己的类
#
# 消息按收件方分三族，每族的基类带编码器和解码器，解码器的表里只有这一族的消息类（加上 `SamplingParams`）：

# %% tags=["remove-input"]
listing("minisgl/message/backend.py")

# %% [markdown]
# 解码器构造出对象之后还查一遍：最外层和批里的每一条都得是这一族的消息（`SamplingParams` 在表里，却只能当字段）。收到垃圾字节、表外的标签、发错了收件箱的消息，都得到一句说清楚的中文错误：

# %%
from minisgl.message import AbortMsg, BaseTokenizerMsg, BatchBackendMsg

bad_inputs = {
    "随便几个字节": b"\xc1\x00\x01",
    "表外的标签": msgpack.packb({"__type__": "os.system", "command": "echo hi"}),
    "发错了收件箱": pack(BaseTokenizerMsg.encoder, AbortMsg(uid=3)),
    "字段对不上": msgpack.packb({"__type__": "AbortBackendMsg", "id": 3}),
    "批里混进了非消息": msgpack.packb(serialize_type(BatchBackendMsg(data=[SamplingParams()]))),
}
for what, raw_bad in bad_inputs.items():
    try:
        unpack(BaseBackendMsg.decoder, raw_bad)
    except ValueError as error:
        print(f"{what}：\n    {error}")

# %% [markdown]
# 三族消息各自的字段见 `message/tokenizer.py` 和 `message/frontend.py`。其中 `RejectMsg`、`TokenizeMsg.stop` 和 `UserReply` 的几个字段是本书加的：调度器拒绝一个请求（比如提示太长）时要能告诉用户为什么，OpenAI 的 `stop` 要交给 tokenizer 进程去匹配，结束的回复要带上结束原因和 token 用量。

# %% tags=["remove-input"]
listing("minisgl/message/frontend.py", "UserReply")

# %% [markdown]
# ## 量一量：带张量 msgpack 更快，成批的小消息 pickle 反而更快
#
# `examples/ch12_wire.py` 对同样的消息量两种格式：字节数，以及从对象到字节（编码）、从字节到对象（解码）各要多少微秒。`UserMsg` 的提示从 16 到 32768 个 token；`DetokenizeMsg` 是调度器每步发回的那种批，一帧（一次 `send()`，也就是一条 ZMQ 消息）装 1 到 256 条。

# %% tags=["milestone"]
# NBVAL_IGNORE_OUTPUT
import sys

sys.path.insert(0, "examples")
from ch12_wire import print_table, wire_table

rows = wire_table()
print_table(rows)
mp256 = dict(rows)["256 条 DetokenizeMsg 一帧"]["msgpack"]
print(f"这次运行：一帧 256 条 DetokenizeMsg，msgpack 编码加解码共 {(mp256['编码'] + mp256['解码']) / 1000:.2f} ms")

# %%
from ch12_wire import PROMPT_LENS

rows_by_name = dict(rows)
sizes = {name: r["msgpack"]["字节"] for name, r in rows}
overhead = {n: sizes[f"UserMsg，提示 {n} 个 token"] - 4 * n for n in PROMPT_LENS}
print("msgpack：UserMsg 的字节数减去 4 × token 数：", overhead)
print(f"msgpack：一帧 256 条 DetokenizeMsg，每条约 {sizes['256 条 DetokenizeMsg 一帧'] / 256:.0f} 字节")
extra_pickle = {n: rows_by_name[f"UserMsg，提示 {n} 个 token"]["pickle"]["字节"] - sizes[f"UserMsg，提示 {n} 个 token"]
                for n in PROMPT_LENS}
print("UserMsg：pickle 比 msgpack 多的字节：", extra_pickle)
assert max(overhead.values()) - min(overhead.values()) <= 4  # 只差 msgpack 写字节串长度的那几个字节

# %% [markdown]
# 字节数是确定的，时间随机器而变（上表是执行这一页时的一次运行）。两种格式各有所长：
#
# - 带张量的 `UserMsg`：msgpack 更小也更快。张量正文就是 4 字节一个 token，其余是一百八十多字节的固定开销（字节串越长，msgpack 写它的长度用的字节越多，1、2 或 4 个，所以多出一到三个字节）；pickle 走 torch 自己的张量 pickle 协议，固定开销多四百多字节，编码、解码也慢好几倍。
# - 一帧很多条的小消息：pickle 更小、更快。pickle 把类名记一次、后面引用；我们的格式每条都重复写 `__type__`、`uid`、`next_token`、`finished` 这些键，拍平和还原又是逐条的 Python 递归。
#
# 我们仍选 msgpack，理由是安全和跨语言（别的语言也有 msgpack 库），不是速度。代价在上表最后一行：一步 256 个请求，发回结果的编码加解码这次运行一共多少，打印在表的下面（随机器而变）；第 11 章量过调度器自己每步的 CPU 时间不到一毫秒，两者放在一起，这笔开销不能忽略。真要省，可以把一批 `DetokenizeMsg` 按列装成几个张量（见练习 2）。
#
# ## ZMQ 队列：本书约定由收件方 bind
#
# 每个队列包一个 [ZMQ 套接字](../glossary.md#zmq-socket)：`ZmqPushQueue` / `ZmqPullQueue` 是一对一或多对一的管道，ZMQ 保证一次 `recv()` 收到对方一次 `send()` 的整条消息，同一个发件方的消息保持顺序。构造参数 `create` 决定这一端 [bind 还是 connect](../glossary.md#bind-connect)。ZMQ 里哪一端 bind 都行；本书约定收件方 bind，广播的 PUB 例外。上游默认也这样，但开了独立的 tokenizer 进程（`num_tokenizer > 0`）时，调度器反过来 bind 反分词进程的地址（`SchedulerConfig.backend_create_detokenizer_link`）：

# %% tags=["remove-input"]
listing("minisgl/utils/mp.py", "_ZmqEndpoint")

# %% tags=["remove-input"]
listing("minisgl/utils/mp.py", "_Receiver")

# %% [markdown]
# `get()` 不给 `timeout` 就一直等；给了（毫秒），到点没收到就抛 `TimeoutError`。`empty()` 不阻塞地问一句“现在有没有”，调度器每步用它把积攒的消息一次取完。`get_raw()` / `decode()` 分开，是为了让调度器 rank 0 把收到的字节原样转发给其他 rank，不必解码再编码。
#
# ### 第二次 bind 悄悄抢走地址：每个服务一个新目录
#
# [IPC 地址](../glossary.md#ipc-address) `ipc://路径` 是一个 Unix 域套接字文件。同一个路径被 bind 两次，ZMQ 不报错：

# %%
import os
import shutil

from minisgl.message import AbortBackendMsg
from minisgl.utils.mp import ZmqPullQueue, ZmqPushQueue, ipc_addr, new_ipc_dir

ipc_dir = new_ipc_dir()
addr = ipc_addr(ipc_dir, "backend")
first = ZmqPullQueue(addr, create=True, decoder=BaseBackendMsg.decoder)  # 第一个服务
second = ZmqPullQueue(addr, create=True, decoder=BaseBackendMsg.decoder)  # 第二个服务用了同一个路径
push = ZmqPushQueue(addr, create=False, encoder=BaseBackendMsg.encoder)
for uid in range(5):
    push.put(AbortBackendMsg(uid=uid))
got_second = [second.get(timeout=5000).uid for _ in range(5)]
print("第二次 bind 没有报错；5 条消息全部到了第二个：", got_second,
      " 第一个收到：", 0 if first.empty() and first.socket.poll(200) == 0 else "有")
assert got_second == list(range(5)) and first.empty()
for q in (first, second, push):
    q.stop()
shutil.rmtree(ipc_dir)
print("目录名的样子：", os.path.basename(ipc_dir)[:8] + "…")

# %% [markdown]
# 第二次 bind 悄悄抢走了地址，第一个服务从此收不到任何消息，也不会报错。所以每个服务启动时用 `new_ipc_dir()` 新建一个临时目录（`tempfile.mkdtemp`），四个地址都放在里面，退出时整个删掉；两个服务同时跑也各用各的。

# %% tags=["remove-input"]
listing("minisgl/utils/mp.py", "ipc_addr")

# %% [markdown]
# ### asyncio 版：等消息时不占着事件循环
#
# API server 跑在一个 asyncio 事件循环里，同时服务很多个 HTTP 连接。它收回复用 `ZmqAsyncPullQueue`：`await q.get()` 在没有消息时把控制权交还事件循环。让一个协程等消息，另一个每毫秒数一下，数到 20 再发消息：

# %%
import asyncio

from minisgl.message import BaseFrontendMsg, UserReply
from minisgl.utils.mp import ZmqAsyncPullQueue, ZmqAsyncPushQueue


async def waiting_does_not_block():
    ipc = new_ipc_dir()
    inbox = ZmqAsyncPullQueue(ipc_addr(ipc, "frontend"), create=True, decoder=BaseFrontendMsg.decoder)
    outbox = ZmqAsyncPushQueue(ipc_addr(ipc, "frontend"), create=False, encoder=BaseFrontendMsg.encoder)
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    async def until_ticks(n):
        while ticks < n:
            await asyncio.sleep(0.001)

    tick_task = asyncio.create_task(ticker())
    waiting = asyncio.create_task(inbox.get())  # 还没有消息：它在等
    await asyncio.wait_for(until_ticks(20), 5)  # 事件循环被堵住的话，这里会超时
    ticks_while_waiting = ticks if not waiting.done() else 0
    await outbox.put(UserReply(uid=1, incremental_output="你好", finished=False))
    reply = await asyncio.wait_for(waiting, 5)
    tick_task.cancel()
    inbox.stop()
    outbox.stop()
    shutil.rmtree(ipc)
    return ticks_while_waiting, reply


ticks_while_waiting, reply = await waiting_does_not_block()
print("get() 还在等消息时，另一个协程已经跑了 20 次：", ticks_while_waiting >= 20)
print("收到：", reply)
assert ticks_while_waiting >= 20 and reply.incremental_output == "你好"

# %% [markdown]
# ## 广播：迟到的订阅者
#
# 多卡时调度器 rank 0 要把收到的每条消息转给其他 rank，用 [PUB/SUB](../glossary.md#pub-sub)：PUB 一方 bind，每条消息发给发送那一刻已经订阅上的所有 SUB。“那一刻”是要害：SUB 的 `connect()` 立即返回，连接和订阅在后台的 I/O 线程里完成，之前发出的消息不会为它保留。这就是[迟到的订阅者](../glossary.md#slow-joiner)。
#
# `examples/ch12_pubsub.py` 把它量出来：发布者扮演 rank 0，两个订阅者线程扮演 rank 1、rank 2，各用自己的 ZMQ context，走真实的 ipc 套接字。两边先各自建好套接字，再过一道[屏障](../glossary.md#barrier)（相当于上游启动时的 `sync_all_ranks()`，一道 gloo 屏障：所有 rank 都到了才一起往下走），然后发布者立即发 500 条，名义上每 0.2 ms 一条（`time.sleep` 常睡得更久，实际间隔打印在下面）：

# %% tags=["remove-input"]
listing("examples/ch12_pubsub.py", "broadcast_round")

# %% tags=["milestone"]
# NBVAL_IGNORE_OUTPUT
from ch12_pubsub import broadcast_round, describe, hwm_round

N = 500
plain = broadcast_round(N)
late_bind = broadcast_round(N, connect_first=True)
with_handshake = broadcast_round(N, connect_first=True, handshake=True)
print(describe("先 bind 后 connect，屏障后立即发", plain, N))
print(describe("先 connect 后 bind，屏障后立即发", late_bind, N))
print(describe("先 connect 后 bind，探针握手后再发", with_handshake, N))
print(f"实际平均间隔：{plain['interval_ms']:.2f} ms")

# %%
import zmq

print("丢的总是开头连续的一段：", plain["prefix"] and late_bind["prefix"])
print("先 connect 后 bind 时有订阅者丢了消息：", max(late_bind["lost"]) > 0,
      "；握手之后丢失：", with_handshake["lost"])
probe = zmq.Context.instance().socket(zmq.SUB)
print("SUB 连不上时，隔多久重试（ZMQ_RECONNECT_IVL，毫秒）：", probe.getsockopt(zmq.RECONNECT_IVL))
pub_probe = zmq.Context.instance().socket(zmq.PUB)
print("默认高水位（条）：SUB 接收", probe.getsockopt(zmq.RCVHWM), "，PUB 发送", pub_probe.getsockopt(zmq.SNDHWM))
probe.close()
pub_probe.close()
assert plain["prefix"] and late_bind["prefix"] and max(late_bind["lost"]) > 0
assert with_handshake["lost"] == [0, 0]

# %% [markdown]
# 三行各说明一件事（具体条数随机器而变，上面是执行这一页时的一次运行）：
#
# - 先 bind 后 connect、过了屏障，订阅仍在路上：开头几条丢了。屏障只说明“每个进程都调用过 `connect()`”，不说明订阅已经生效。
# - 订阅者先 connect、发布者后 bind（多个进程一起启动时，谁先谁后没有保证）：地址还不存在，SUB 要等重连的定时器到点才重试（`RECONNECT_IVL` 是 100 ms，libzmq 再加上 0 到 100 ms 的随机量），到点之前发出的消息全部丢掉。哪个订阅者丢多少，看它的定时器落在哪里，每次运行都不一样。
# - 握手：屏障之后发布者每毫秒发一个探针，等每个订阅者都通过另一条 PUSH/PULL 报告“收到过探针”，再发一个 START 标记；订阅者丢掉 START 之前的一切。订阅者收到过探针，说明订阅已经生效，此后的消息一条不丢。
#
# PUB 还有第二种丢法：订阅者不读，消息堆到[高水位](../glossary.md#high-water-mark)（PUB 的发送队列和 SUB 的接收队列默认各 1000 条，上面打印的），PUB 不阻塞、直接丢掉新的。`ZmqPubQueue`、`ZmqSubQueue` 可以给 `hwm`，两端都给 0（不设上限，在 bind/connect 之前设）就一条不丢：

# %%
# NBVAL_IGNORE_OUTPUT
kept = hwm_round(20_000)
print(f"订阅者不读，一口气发 20000 条：事后读到 {kept} 条，其余被丢掉")
kept_all = hwm_round(20_000, hwm=0)
print(f"两端都设 hwm=0：事后读到 {kept_all} 条")
assert kept < 20_000 and kept_all == 20_000

# %% [markdown]
# ### 上游的广播：会丢，窗口被启动时间藏住
#
# 上游每个调度器进程在 `Scheduler.__init__` 的最后建 I/O（rank 0 bind PUB，其他 rank connect SUB），各进程之间不排先后；然后 `_run_scheduler` 调 `sync_all_ranks()`（gloo 屏障），rank 0 向启动器报告就绪。这正是上面第一、二行的设置：屏障不等订阅生效，SUB 若比 PUB 先 connect，还要等 100 到 200 ms 才重试。第一条广播要等第一个请求到来：启动器还要等 tokenizer 进程就绪、再启动 uvicorn，通常已经过了这段时间。可如果请求恰好在窗口里到达，rank 1 就漏了一条：它按 gloo 广播的条数去取，要么一直等下去，要么把下一条当成这一条，各 rank 的批从此不同。高水位那一种要一步转发 1000 多条才碰得到（其他 rank 拿到条数就开始读，积压最多是一步的消息），一大批请求同时到达时就会发生，第 14 章因此给广播设 `hwm=0`。要把启动时的窗口关掉，只能像上面那样握手：等订阅者亲口说收到过。
#
# ??? note "深入：XPUB 也能知道订阅到了没有"
#
#     ZMQ 还有一种 XPUB 套接字：它和 PUB 一样发布，但每当有订阅者订阅，它能 `recv()` 到一条订阅消息（第一个字节是 1，后面是主题）。设 `XPUB_VERBOSE` 之后，每个订阅者的订阅都会报上来，发布者数到 n 条就知道 n 个订阅者都就绪了，不需要另一条回报的管道。我们仍用普通 PUB 加探针：它只用到本章已有的两种队列，而且“订阅者真的收到过一条”是最直接的证据。

# %% [markdown]
# ## 运行
#
# 本章的 main 在本章的树里真实跑出来的输出：

# %%
run("python examples/ch12_message.py")

# %% [markdown]
# 值得注意的地方：
#
# - 一条 3 个 token 的 `UserMsg` 编码成 191 字节：`buffer` 只占 12 个，其余是类型标签、字段名和采样参数。
# - 三个请求装在一个 `BatchBackendMsg` 里一次发出，子进程收到一帧、拆成 3 条逐条处理；收回的 token 按请求分开后与发出的完全相同，顺序不乱（同一个发件方的消息，ZMQ 保持顺序）。
# - 子进程由 spawn 启动，它 bind `backend`、connect `tokenizer`；本进程反过来。main 先 connect 后子进程才 bind 也没关系：PUSH 会把消息留在本地，等连上之后再送出。

# %% [markdown]
# ## 与上游的差异
#
# - 我们每族的解码器只查一张写明的类表；上游把模块的 `globals()` 交给解码器，表里还有 `torch`、`serialize_type` 这些名字：上游按 `cls_map[name](**kwargs)` 构造，标签写 `serialize_type`，解码器就会用收到的参数调用这个函数。`python/minisgl/message/backend.py` · `BaseBackendMsg.decoder`
# - 我们的 bfloat16 借 int16 搬运；上游用 `self.numpy()` 编码、`getattr(np, dtype)` 解码，bfloat16 两头都会失败（上游只发 int32 的 token，碰不到）。`python/minisgl/message/utils.py` · `serialize_type`、`deserialize_type`
# - 我们的地址放在每个服务新建的临时目录里，退出时删掉；上游是 `/tmp/minisgl_0` 这样的固定路径加进程号后缀。`python/minisgl/scheduler/config.py` · `SchedulerConfig.zmq_backend_addr`
# - 我们的 `stop()` 最多为没发出的消息等 1 秒，`get()` 可以带超时；上游用 ZMQ 默认的无限等待，有没发出的消息且对端不在时，`context.term()` 会一直卡住。`python/minisgl/utils/mp.py` · `ZmqPushQueue.stop`

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch12_message.py`，全部走真实的套接字、每个测试一个自己的 IPC 目录：每一种消息经过 msgpack 往返后逐字段相同（张量逐比特，10 种 dtype，含 bfloat16 的 inf、-0.0 和不连续的切片）；垃圾字节、表外的标签、发错了收件箱、字段不对、坏的 `SamplingParams` 各有一句中文错误；PUSH/PULL 的顺序、多个发件方、跨进程；第二次 bind 抢走地址；PUB/SUB 丢掉订阅之前的消息、握手之后一条不丢；asyncio 版在等待时不阻塞事件循环。

# %% tags=["remove-input"]
listing("tests/test_ch12_message.py", "test_pub_sub_drops_what_was_sent_before_the_subscriber_joined")

# %%
run("python -m pytest -q --color=no tests/test_ch12_message.py -k 'tensors or unknown or garbage or pub_sub or steals'")

# %% [markdown]
# ## 怎么讲清楚
#
# 进程之间只能传字节，我们选一种只能描述数据的格式：消息拍平成带类型标签的字典交给 msgpack，解码器只按本族的白名单构造对象，收件方不会像 pickle 那样替发件方调用任意函数。三样东西撑住它：张量按原始字节加 dtype 发，bfloat16 借同宽的 int16 搬运，一个比特不差；队列本书约定收件方 bind，地址放在每个服务自己的临时目录里；广播先握手，等每个订阅者报告收到过探针再发，一条不丢。要记住的数：一帧 256 条小消息，msgpack 14116 字节、pickle 只有 6010 字节，编码解码也是 pickle 快，这是为安全付的钱。

# %% [markdown]
# ## 练习
#
# 1. **发错收件箱**。tokenizer 进程不小心把一条 `DetokenizeMsg` 推进了调度器的 `backend`。调度器会看到什么？如果两族的解码器共用一张大表呢？
# 2. **列式打包**。把一帧 256 条 `DetokenizeMsg` 换成一条消息，里面是 `uids`、`tokens` 两个 int32 张量和一个 bool 张量。估计它在上表里的字节数，并说出它省掉了什么。
# 3. **挑战：不要 gloo 也能对齐**。第 14 章每步用 gloo 广播“这一步有几条消息”。只用 PUB/SUB，能不能让其他 rank 知道一步在哪里结束？它比 gloo 的办法多承担了什么风险？
#
# ??? success "参考答案"
#
#     1. 调度器的解码器表里没有 `DetokenizeMsg`，`unpack` 抛出“未知的消息类型 'DetokenizeMsg'”的 ValueError，错误当场暴露。共用一张大表时，解码出来的对象还要过族检查：最外层一条 `DetokenizeMsg` 不是 `BaseBackendMsg`，照样被拒；装在 `BatchBackendMsg.data` 里的那条，族检查也逐条查到。上游没有族检查：共用一张表的话，它会跟着批一起到达 `Scheduler._process_one_msg`，落进最后的 `else:`，抛出 `NotImplementedError`，整个调度器进程崩掉。
#     2. 三个张量的正文是 256 × (4 + 4 + 1) = 2304 字节，加上三个张量的标签和一个外层标签，两千四百多字节，比上表的一万四千字节小得多；省掉的是每条都重复写的 `__type__` 和三个字段名，编码也从 256 次 Python 递归变成几次张量拷贝。
#     3. 可以：rank 0 每步结束时也发一个“本步结束”标记，其他 rank 读到标记为止。两种办法其实都靠 PUB 一条不丢（启动时的握手、高水位之内）：gloo 只传条数，数据消息丢了一条，rank 1 照样按条数去取，把下一条当成这一条，各 rank 的批从此不同。标记的办法只是多了一样会丢的东西：丢了标记，rank 就把下一步的消息算进这一步。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 36   # 把第 36 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 36    # 判题
# python practice/judge.py hint 36    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - 消息按收件方分三族：发给调度器的（`UserMsg`、`AbortBackendMsg`、`ExitMsg`），发给 tokenizer 进程的（`TokenizeMsg`、`AbortMsg`、`DetokenizeMsg`、`RejectMsg`），发回 API server 的（`UserReply`），每族有一个批消息。
# - 序列化：dataclass 拍平成带 `__type__` 的字典，一维张量写成原始字节加 dtype（bfloat16 借 int16），再交给 msgpack；解码只按本族的白名单构造，坏输入得到中文错误。
# - 量出来的取舍：带张量的消息 msgpack 又小又快，成批的小消息 pickle 更快；我们为安全选 msgpack。
# - 队列：本书约定收件方 bind，发件方 connect，PUB 例外；地址在每个服务自己的临时目录里，因为第二次 bind 会悄悄抢走地址。
# - PUB/SUB 丢掉订阅生效之前的消息，屏障挡不住；探针握手之后一条不丢。
