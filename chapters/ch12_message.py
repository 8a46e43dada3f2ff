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
# 到第 11 章为止，请求从 `LLM.generate` 进去、结果从它出来，全在一个进程里；服务要拆成 API server、tokenizer 进程和调度器几个进程，而进程之间只能传字节。本章把消息拍平成带[类型标签](../glossary.md#type-tag)的字典交给 msgpack，收件方只按本族消息的白名单构造对象（[序列化](../glossary.md#serialization)）。字节由 ZMQ 的 PUSH/PULL 送到对面：收件方 bind，地址放在每个服务自己新建的目录里。main 让两个进程互发消息，收回的 token 一个不差、顺序不乱。

# %% tags=["remove-cell"]
from minibook.page import *
setup(12)

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 把一个 `UserMsg` 对象直接交给 ZMQ 套接字会怎样？交给 `multiprocessing.Queue` 呢，子进程拿到的是什么？
# 2. pickle 什么都能装，为什么不用它？解码器为什么只查一张白名单？
# 3. numpy 没有 bfloat16，一个 bfloat16 张量怎样变成字节、再一个比特不差地变回来？
# 4. 一对 PUSH/PULL 里本书让谁 bind？同一个 ipc 路径被 bind 两次会怎样？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 套接字只收字节，抛 `TypeError`。multiprocessing 替你 pickle，子进程拿到的是照着字节另造的一份，改它的字段父进程看不见（张量例外：torch 把它挪进共享内存）。
#     2. pickle 的字节里能写“还原时调用哪个函数”，收件方照做。白名单让发件方只能在本族的几个消息类里选，表外的标签一律报错。
#     3. `view` 成同样 16 位宽的 int16（比特不变，只换解释），numpy 认得 int16，取出字节；收到后按 int16 读回，再 `view` 回 bfloat16。
#     4. 收件方 bind：它长期存在、地址固定，发件方随时 connect 进来。第二次 bind 不报错，悄悄抢走地址，之后的消息全到了后来者那里；所以每个服务用一个新目录。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章只新建文件：`minisgl/message/` 下的三族消息和编码工具，`minisgl/utils/mp.py` 里的队列（那里的 PUB/SUB 两种第 14 章用到时再讲）。`examples/` 下是 main 和两个演示脚本。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch12_message.py`：本进程扮演 tokenizer，spawn 一个子进程扮演调度器，把三个 `UserMsg` 装进一个 `BatchBackendMsg` 推过去；子进程把每个请求的 token 逐个作为 `DetokenizeMsg` 推回来。`python tools/steps.py check 12` 会跑它和本章的测试；只想跑 main 或演示：
#
# ```bash
# python tools/steps.py run 12 -- python examples/ch12_message.py
# python tools/steps.py run 12 -- python examples/ch12_boundary.py   # 对象过不了进程边界
# python tools/steps.py run 12 -- python examples/ch12_wire.py       # msgpack 对 pickle
# ```
#
# 第 15 章把这几类进程组装成服务，本章先把它们之间的线接好（rank 0 到其他 rank 的广播是第 14 章的事）：
#
# ![四个方框：API server（主进程，asyncio）、tokenizer 进程、调度器 rank 0、调度器 rank 1 到 n-1。API server 向 tokenizer 发 TokenizeMsg 和 AbortMsg，收 UserReply；tokenizer 向 rank 0 发 UserMsg、ExitMsg、AbortBackendMsg，收 DetokenizeMsg 和 RejectMsg；rank 0 用 PUB 把收到的字节原样转发给其他 rank 的 SUB。每个收件箱由收件方 bind（实心圆），发件方 connect（空心圆），广播由 PUB 一方 bind；四个地址 frontend、tokenizer、backend、broadcast 都在每个服务自己的临时目录里](../assets/ch12_processes.svg)
#
# ## 对象过不了进程边界
#
# 一个 `UserMsg` 是 dataclass，里面有一个张量和一个 `SamplingParams`。先把它原样交给 ZMQ 套接字和 msgpack，再经 `multiprocessing.Queue` 交给一个 spawn 出来的子进程，子进程改掉它的三处：

# %% tags=["remove-input"]
listing("examples/ch12_boundary.py", "_child")

# %%
import sys

sys.path.insert(0, "examples")  # 本章的演示脚本
from ch12_boundary import refusals, sample_msg, through_multiprocessing

msg = sample_msg()
for what, result in refusals(msg).items():
    print(f"{what}(UserMsg)：{result}")
after = through_multiprocessing(msg)
print(f"子进程改完之后，父进程里：uid={after.uid}，max_tokens={after.sampling_params.max_tokens}，"
      f"input_ids={after.input_ids.tolist()}（张量在共享内存里：{after.input_ids.is_shared()}）")
assert (after.uid, after.sampling_params.max_tokens, after.input_ids[0].item()) == (7, 64, 0)

# %% [markdown]
# 套接字只收字节，msgpack 只认 None、bool、int、float、str、bytes、list、dict。multiprocessing 看上去传了对象，其实替你 pickle 成字节、在子进程里照着另造一个：子进程改的 `uid` 和 `max_tokens`，父进程看不见。张量是例外（torch 给 multiprocessing 注册了自己的办法，把张量挪进共享内存、只传一个句柄），可这只在 multiprocessing 里、同一台机器上管用；我们的队列上跑的只有字节，问题只是字节里写什么。
#
# ## 不用 pickle：字节里不能写“调用什么”
#
# pickle 什么都能装，可它装得太多了：字节里写着还原时调用哪个函数、传什么参数，`pickle.loads` 就照做。

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
# 用 pickle，谁能往收件箱里写，谁就能让收件进程做任何事。我们要的格式只能描述数据。
#
# ## 拍平：类型标签加一张白名单
#
# 发送前把消息拍平成 msgpack 认识的结构：dataclass 写成 `{"__type__": 类名, 字段: 值}`，字段值递归处理；一维 CPU 张量写成原始字节加 dtype 名。

# %% tags=["remove-input"]
listing("minisgl/message/utils.py", "serialize_type")

# %% tags=["remove-input"]
listing("minisgl/message/utils.py", "deserialize_type")

# %% [markdown]
# 解码时只查调用方给的表 `cls_map`，表外的标签报错；构造仍经过类自己的 `__init__`，`SamplingParams` 的检查在收件方再做一遍。

# %%
from minisgl.message import BaseBackendMsg
from minisgl.utils.mp import pack, unpack

msg = sample_msg()  # 新的一份：上面那份的 input_ids[0] 已被子进程改成 0
print(msg.encoder())
raw = pack(BaseBackendMsg.encoder, msg)
back = unpack(BaseBackendMsg.decoder, raw)
print(f"msgpack 之后 {len(raw)} 字节；还原：{back}")
assert back.input_ids.tolist() == msg.input_ids.tolist() and back.sampling_params == msg.sampling_params

# %% [markdown]
# 消息按收件方分三族，每族的基类带编码器和解码器，解码器的表里只有这一族的消息类和 `SamplingParams`：

# %% tags=["remove-input"]
listing("minisgl/message/backend.py")

# %% [markdown]
# 解码出对象之后还查一遍族：最外层和批里的每一条都得是这一族的消息。垃圾字节、表外的标签、发错了收件箱，都得到一句说清楚的中文错误：

# %%
import msgpack

from minisgl.core import SamplingParams
from minisgl.message import AbortMsg, BaseTokenizerMsg, BatchBackendMsg, serialize_type

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
# ??? note "深入：另外两族，和本书加的几个字段"
#
#     发给 tokenizer 进程的在 `message/tokenizer.py`（`TokenizeMsg`、`AbortMsg`、`DetokenizeMsg`、`RejectMsg`），发回 API server 的在 `message/frontend.py`（`UserReply`）。`RejectMsg`、`TokenizeMsg.stop` 和 `UserReply` 的结束原因、token 用量是本书加的：调度器拒绝一个请求（比如提示太长）时要能告诉用户为什么，OpenAI 的 `stop` 要交给 tokenizer 进程去匹配，结束的回复要带上结束原因和用量。
#
# ### bfloat16：借 int16 搬运比特
#
# 张量变字节最顺手的写法是 `t.numpy().tobytes()`，可 numpy 没有 bfloat16。bfloat16 和 int16 都是 16 位：`view(torch.int16)` 不改任何一个比特，numpy 就认得了；收件方按 int16 读出，再 `view` 回来。

# %% tags=["remove-input"]
listing("minisgl/message/utils.py", "_tensor_to_dict")

# %%
import torch

from minisgl.message import deserialize_type

bf16 = torch.tensor([1.0, -2.0, 3.140625], dtype=torch.bfloat16)
try:
    bf16.numpy()
except TypeError as error:
    print("bf16.numpy()：TypeError:", error)
wire = serialize_type(bf16)
print("线上的字节：", wire["buffer"].hex(" ", 2), " dtype:", wire["dtype"])
again = deserialize_type({}, msgpack.unpackb(msgpack.packb(wire, use_bin_type=True)))
print("还原：", again, " 比特相同：", torch.equal(again.view(torch.int16), bf16.view(torch.int16)))
assert again.dtype == torch.bfloat16 and torch.equal(again.view(torch.int16), bf16.view(torch.int16))

# %% [markdown]
# 1.0 的 bfloat16 是 `0x3F80`，小端写成 `80 3f`。允许的 dtype 是一张固定的清单，收到不认识的名字就报错，不会拿它去 `getattr(np, ...)`。
#
# ### 代价：成批的小消息，pickle 更小也更快
#
# `examples/ch12_wire.py` 对同样的消息量两种格式：字节数，和编码、解码各要多少微秒。`UserMsg` 的提示从 16 到 32768 个 token；`DetokenizeMsg` 是调度器每步发回的那种批，一帧（一次 `send()`）装 1 到 256 条。

# %% tags=["milestone"]
# NBVAL_IGNORE_OUTPUT
from ch12_wire import print_table, wire_table

rows = dict(wire_table())
print_table(list(rows.items()))
for name in ("UserMsg，提示 32768 个 token", "256 条 DetokenizeMsg 一帧"):
    cost = {fmt: (r["字节"], r["编码"] + r["解码"]) for fmt, r in rows[name].items()}
    print(f"{name}：" + "，".join(f"{fmt} {b} 字节、编码加解码 {us:.0f} μs" for fmt, (b, us) in cost.items()))

# %% [markdown]
# 带张量的消息 msgpack 又小又快；一帧很多条的小消息反过来，pickle 更小也更快（最后一行）。我们仍选 msgpack，为的是安全（也能跨语言），不是速度。
#
# ??? note "深入：字节花在哪里，怎样省"
#
#     下面一格只看字节数（确定的，不随机器变）。`UserMsg` 的张量正文是 4 字节一个 token，其余是两百六十多字节的固定开销（采样参数的每个字段名都写在线上）（字节串越长，msgpack 写长度用的字节越多，所以差一到三个字节）；pickle 走 torch 自己的张量 pickle 协议，固定开销还要多四百三十多字节。成批的小消息里，pickle 把类名记一次、后面引用，我们的格式每条都重复写 `__type__` 和各个字段名，拍平和还原又是逐条的 Python 递归。第 11 章量过调度器自己每步的 CPU 时间不到一毫秒，一步 256 个请求时发回结果的这笔开销不能忽略；真要省，可以把一批 `DetokenizeMsg` 按列装成几个张量（练习 2）。

# %%
from ch12_wire import PROMPT_LENS

sizes = {name: r["msgpack"]["字节"] for name, r in rows.items()}
overhead = {n: sizes[f"UserMsg，提示 {n} 个 token"] - 4 * n for n in PROMPT_LENS}
print("msgpack：UserMsg 的字节数减去 4 × token 数：", overhead)
print("UserMsg：pickle 比 msgpack 多的字节：",
      {n: rows[f"UserMsg，提示 {n} 个 token"]["pickle"]["字节"] - sizes[f"UserMsg，提示 {n} 个 token"]
       for n in PROMPT_LENS})
assert max(overhead.values()) - min(overhead.values()) <= 4  # 只差 msgpack 写字节串长度的那几个字节

# %% [markdown]
# ## PUSH/PULL：收件方 bind
#
# 每个队列包一个 [ZMQ 套接字](../glossary.md#zmq-socket)。`ZmqPushQueue` / `ZmqPullQueue` 是一对一或多对一的管道：一次 `recv()` 收到对方一次 `send()` 的整条消息，同一个发件方的消息保持顺序。构造参数 `create` 决定这一端 [bind 还是 connect](../glossary.md#bind-connect)：ZMQ 里哪一端 bind 都行，本书约定收件方 bind，因为它长期存在、地址固定，发件方可以有好几个。

# %% tags=["remove-input"]
listing("minisgl/utils/mp.py", "_ZmqEndpoint")

# %% [markdown]
# `put()` 编码后发送，`get()` 收一帧再解码；`get(timeout=毫秒)` 到点没收到就抛 `TimeoutError`，`empty()` 不阻塞地问一句“现在有没有”。`get_raw()` / `decode()` 分开，是为了让收到的字节能原样转发（第 14 章）。
#
# ??? note "深入：asyncio 版，和上游的一个例外"
#
#     API server 跑在 asyncio 事件循环里，它用 `ZmqAsyncPushQueue` / `ZmqAsyncPullQueue`：`await q.get()` 没有消息时把控制权交还事件循环，别的 HTTP 连接照常处理（测试 `test_async_push_pull_does_not_block_the_event_loop` 让一个协程等消息、另一个照常数数，下面的测试一节跑它）。上游默认也是收件方 bind，但开了独立的反分词进程（`num_tokenizer > 0`）时，调度器反过来 bind 反分词进程的地址（`SchedulerConfig.backend_create_detokenizer_link`）。
#
# ### 第二次 bind 悄悄抢走地址：每个服务一个新目录
#
# [IPC 地址](../glossary.md#ipc-address) `ipc://路径` 是一个 Unix 域套接字文件。同一个路径 bind 两次：

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
# 第一个服务从此收不到任何消息，也不报错。所以每个服务启动时新建一个临时目录，地址都放在里面，退出时整个删掉：

# %% tags=["remove-input"]
listing("minisgl/utils/mp.py", "new_ipc_dir")

# %% [markdown]
# ## 运行
#
# 本章的 main：子进程扮演调度器，本进程扮演 tokenizer。

# %% tags=["remove-input"]
listing("examples/ch12_message.py", "fake_scheduler")

# %% tags=["remove-input"]
listing("examples/ch12_message.py", "main")

# %% [markdown]
# 在本章的树里真实跑出来的输出：

# %%
run("python examples/ch12_message.py")

# %% [markdown]
# 值得注意的地方：
#
# - “msgpack 之后 … 字节”那一行的字节数里，`buffer` 只占 12 个（3 个 int32，上一行里那串 `b'\xb2&...'`），其余是类型标签、字段名和采样参数；解码回来逐字段相同。
# - 三个请求装在一个 `BatchBackendMsg` 里一次发出，子进程收到一帧、拆成 3 条；收回的 token 与发出的逐个相同，顺序不乱。
# - 源码里 `outbox` 在 `child.start()` 之后立刻发出那一批，子进程这时多半还在导入 torch、没有 bind；消息照样全部收回（最后一行）：PUSH 先把消息留在本地，连上之后再送出。

# %% [markdown]
# ## 与上游的差异
#
# - 我们每族的解码器只查一张写明的类表，上游把模块的 `globals()` 交给解码器（表里还有 `torch`、`serialize_type` 这些名字），因为标签决定构造什么，表里只该有消息类。`python/minisgl/message/backend.py` · `BaseBackendMsg.decoder`
# - 我们的 bfloat16 借 int16 搬运，上游用 `numpy()` 编码、`getattr(np, dtype)` 解码，因为 numpy 没有 bfloat16（上游只发 int32 的 token，碰不到）。`python/minisgl/message/utils.py` · `serialize_type`
# - 我们的地址放在每个服务新建的临时目录里，上游用 `/tmp/minisgl_0` 这样的固定路径加进程号后缀，因为第二次 bind 会悄悄抢走地址。`python/minisgl/scheduler/config.py` · `SchedulerConfig.zmq_backend_addr`
# - 我们的 `stop()` 最多为没发出的消息等 1 秒、`get()` 可以带超时，上游用 ZMQ 默认的无限等待，因为对端不在时 `context.term()` 会一直卡住。`python/minisgl/utils/mp.py` · `ZmqPushQueue.stop`
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 三族消息，各有编码器和解码器：`python/minisgl/message/backend.py` · `BaseBackendMsg`（第 12～19 行）、`python/minisgl/message/frontend.py` · `BaseFrontendMsg`（第 9～17 行）、`python/minisgl/message/tokenizer.py` · `BaseTokenizerMsg`（第 11～19 行）
# - 一帧打包多条：`python/minisgl/message/backend.py` · `BatchBackendMsg`（第 22～24 行）
# - 拍平成带类型标签的字典、再还原：`python/minisgl/message/utils.py` · `serialize_type`（第 20～35 行）、`python/minisgl/message/utils.py` · `deserialize_type`（第 52～69 行）
# - PUSH/PULL 队列：`python/minisgl/utils/mp.py` · `ZmqPushQueue`（第 12～30 行）、`python/minisgl/utils/mp.py` · `ZmqPullQueue`（第 54～81 行）
# - asyncio 版：`python/minisgl/utils/mp.py` · `ZmqAsyncPushQueue`（第 33～51 行）、`python/minisgl/utils/mp.py` · `ZmqAsyncPullQueue`（第 84～102 行）
# - 广播（第 14 章用到）：`python/minisgl/utils/mp.py` · `ZmqPubQueue`（第 105～126 行）、`python/minisgl/utils/mp.py` · `ZmqSubQueue`（第 129～151 行）
# - 地址：`python/minisgl/scheduler/config.py` · `SchedulerConfig.zmq_backend_addr`（第 23～25 行）

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch12_message.py`，全部走真实的套接字、每个测试一个自己的 IPC 目录：每一种消息往返后逐字段相同（张量逐比特，10 种 dtype，含 bfloat16 的 inf、-0.0 和不连续的切片）；坏输入各有一句中文错误；PUSH/PULL 的顺序、多个发件方、跨进程；第二次 bind 抢走地址；asyncio 版等待时不阻塞事件循环。`mp.py` 里 PUB/SUB 队列的测试也在这里，它们讲的事在第 14 章。

# %% tags=["remove-input"]
listing("tests/test_ch12_message.py", "test_a_second_ipc_bind_silently_steals_the_address")

# %%
run("python -m pytest -q --color=no tests/test_ch12_message.py -k 'tensors or unknown or garbage or steals or boundary or async'")

# %% [markdown]
# ## 怎么讲清楚
#
# 进程之间只能传字节：套接字不收对象，multiprocessing 看似传了对象，其实是照着字节另造一份。所以字节里写什么由我们决定，而且只写数据：消息拍平成带类型标签的字典交给 msgpack，收件方只按本族的白名单构造对象，不会像 pickle 那样替发件方调用函数。三样东西撑住它：张量按原始字节加 dtype 发，bfloat16 借同宽的 int16，一个比特不差；队列由收件方 bind、发件方 connect；地址放在每个服务新建的目录里，因为同一路径第二次 bind 不报错，5 条消息全部到了后来者那里。

# %% [markdown]
# ## 练习
#
# 1. **发错收件箱**。tokenizer 进程不小心把一条 `DetokenizeMsg` 推进了调度器的 `backend`。调度器会看到什么？如果两族的解码器共用一张大表呢？
# 2. **列式打包**。把一帧 256 条 `DetokenizeMsg` 换成一条消息，里面是 `uids`、`tokens` 两个 int32 张量和一个 bool 张量。估计它的字节数，并说出它省掉了什么。
# 3. **挑战：给 pickle 加白名单**。`pickle.Unpickler.find_class` 可以只放行本族的消息类。这样的 pickle 和我们的格式一样安全吗？要发张量，还得放行什么？
#
# ??? success "参考答案"
#
#     1. 调度器的解码器表里没有 `DetokenizeMsg`，`unpack` 抛出“未知的消息类型 'DetokenizeMsg'”的 ValueError，错误当场暴露。共用一张大表时还有族检查：最外层的、装在 `BatchBackendMsg.data` 里的，都因为不是 `BaseBackendMsg` 被拒。
#     2. 三个张量的正文是 256 × (4 + 4 + 1) = 2304 字节，加上几个标签和字段名，两千四百字节上下，比上表里逐条发的小得多。省掉的是每条都重复写的 `__type__` 和字段名，编码也从 256 次 Python 递归变成几次张量拷贝。
#     3. 不一样。pickle 发张量要放行 `torch.storage._load_from_bytes`，它里面是 `torch.load(..., weights_only=False)`，又是一个不受白名单管的完整 unpickler；而且 pickle 还原对象不调用 `__init__`，`max_tokens=-5` 的 `SamplingParams` 照样进来。我们的格式里字节只能表示数据，对象一律经 `__init__` 构造。
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
# - 进程之间只有字节：套接字不收对象，multiprocessing 替你 pickle、在对面另造一份。
# - 序列化：dataclass 拍平成带 `__type__` 的字典，一维张量写成原始字节加 dtype（bfloat16 借 int16），再交给 msgpack；解码只按本族的白名单构造，坏输入得到中文错误。不用 pickle，因为它的字节能让收件方调用任意函数；代价是成批的小消息比 pickle 大、也慢。
# - 消息按收件方分三族：发给调度器的，发给 tokenizer 进程的，发回 API server 的，每族有一个批消息。
# - 队列：PUSH/PULL，收件方 bind、发件方 connect；地址在每个服务新建的临时目录里，因为第二次 bind 会悄悄抢走地址。
