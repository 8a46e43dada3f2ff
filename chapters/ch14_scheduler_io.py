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
# # 第 14 章 调度器的收发与多 rank 同步
#
# 到第 11 章为止，调度器由调用方一步步 `step()`；服务时它是一个独立的进程，请求以消息的形式随时从 tokenizer 进程到来。[张量并行](../glossary.md#tensor-parallel)时每个 [rank](../glossary.md#rank) 一个调度器进程，各自拼批：同一条消息只要在两个 rank 的不同步被处理，它们拼出的批就不同，all_reduce 会把不同请求的部分和加在一起。本章写 [`SchedulerIO`](../glossary.md#scheduler-io)（rank 0 收消息、原样转发、经 [gloo](../glossary.md#gloo)（torch.distributed 在 CPU 上的后端）广播每一步的条数）和服务的主循环 `run_forever`。两个调度器进程收同样的流量、逐步比较[批哈希](../glossary.md#batch-hash)：相同；把 decode 的顺序故意做成依赖进程本地的东西，就不同了。

# %% tags=["remove-cell"]
from minibook.page import *
setup(14)

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 让 tokenizer 进程把每条消息发给每个 rank 一份，各 rank 自己收，为什么不够？
# 2. 没有请求时，rank 1 为什么等在 SUB 套接字上，而不是等在条数的广播里？
# 3. 迟到的订阅者在这里会造成什么后果？怎样保证不发生？
# 4. 各 rank 收到的消息完全一样，拼出的批还可能不同吗？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 每个 rank 看到一条消息的时刻不同，同一条消息会落在不同的步里。要对齐的是“第几步处理哪几条”，所以由 rank 0 说了算，再把条数广播出去。
#     2. gloo 的集合通信有超时（默认 30 分钟），空闲太久的服务会在广播里报错，等在 ZMQ 上没有超时。各 rank 状态相同、同时进入等待，等到的第一条不计入条数。
#     3. rank 1 漏掉开头的消息，之后按条数取就取到后面的消息，从此每一步都错位。转发之前握手：rank 0 反复发探针，all_reduce(MIN) 到每个 rank 都听到过，再发一帧“准备好了”。
#     4. 可能：拼批只要依赖进程本地的东西（set 的迭代顺序、对象地址、时间），批里请求的顺序就会不同。上游的 decode 批曾经就是这样（#113）。

# %% [markdown]
# ## 本章要回顾的文件
#
# 新建 `scheduler/io.py`（`SchedulerIO`）；修改 `scheduler/config.py`（`ipc_dir` 和三个地址）与 `scheduler/scheduler.py`（收一个 `io`，加上 `run_forever`、`_process_one_msg`）。离线的 `LLM.generate` 不经过这些，行为不变。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch14_scheduler_io.py`：本进程扮演 tokenizer 进程，两个调度器进程当 rank 0 和 rank 1（模型都是完整的 tiny Qwen3，本章不按 rank 切分），同样的流量跑两轮，逐步比较两个 rank 的批哈希，最后量条数广播的开销。`python tools/steps.py check 14` 会跑它和本章的测试；只想跑 main：
#
# ```bash
# python tools/steps.py run 14 -- python examples/ch14_scheduler_io.py
# python tools/steps.py run 14 -- python examples/ch14_pubsub.py   # PUB/SUB 的两种丢法
# ```
#
# ![每一步：tokenizer 进程把请求、取消、退出推到 rank 0 的 backend；rank 0 取走已到的消息，原样转发到 broadcast（PUB），rank 1 的 SUB 收到这些帧；gloo 进程组广播条数 k，rank 1 从 SUB 正好取 k 条；两个 rank 处理同样的 k 条、拼出同样的批（批哈希相同）；只有 rank 0 把新 token 和拒绝发回 tokenizer 进程。底部：空闲时先核对 KV 页再等在 ZMQ 上；启动时握手，第一条真消息不丢](../assets/ch14_scheduler_io.svg)
#
# ## 先量：各 rank 自己收，同一条消息落在不同的步
#
# 先看不对齐会怎样。两个线程当两个 rank，各有一个 SUB 套接字。每一步两个 rank 先在一道 `threading.Barrier` 碰头（代替真实的 rank 每步都要做的 all_reduce），再各自取走已经到达的全部消息，然后“前向” 3 ms；rank 1 取消息比 rank 0 晚 0.5 ms。

# %%
# NBVAL_IGNORE_OUTPUT
import shutil
import threading
import time

from minisgl.utils.mp import ZmqPubQueue, ZmqSubQueue, ipc_addr, new_ipc_dir


def each_rank_polls_itself(lag_ms=0.5, step_ms=3.0, n_msgs=200):
    """两个 rank 步调一致（每步碰头），各自取已到的消息：返回每个 rank 里 消息号 → 在第几步处理。"""
    ipc_dir = new_ipc_dir()
    addr = ipc_addr(ipc_dir, "demo")
    pub = ZmqPubQueue(addr, create=True, encoder=None)
    subs = [ZmqSubQueue(addr, create=False, decoder=None) for _ in range(2)]
    time.sleep(0.3)  # 先让订阅生效（迟到的订阅者：本章后面量它，并用握手代替这次等待）
    seen = [{}, {}]
    state = {"done": False}
    # 代替每步的 all_reduce：两个 rank 都到了才往下走；到齐时顺便看看消息是否都收到了
    together = threading.Barrier(2, action=lambda: state.update(done=all(len(s) == n_msgs for s in seen)))

    def rank(r):
        step = 0
        while True:
            together.wait()
            if state["done"]:
                return
            if r == 1:
                time.sleep(lag_ms / 1000)  # rank 1 晚一点点去取
            while not subs[r].empty():
                seen[r][int(subs[r].get_raw())] = step
            time.sleep(step_ms / 1000)  # 这一步的前向
            step += 1

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for i in range(n_msgs):
        pub.put_raw(str(i).encode())
        time.sleep(0.002)
    for t in threads:
        t.join()
    for q in (pub, *subs):
        q.stop()
    shutil.rmtree(ipc_dir)
    return seen


seen = each_rank_polls_itself()
split = [i for i in sorted(seen[0]) if seen[0][i] != seen[1][i]]
print(f"{len(seen[0])} 条消息，两个 rank 不在同一步处理的：{len(split)} 条")
print("比如：", ", ".join(f"#{i} rank0 第 {seen[0][i]} 步 / rank1 第 {seen[1][i]} 步" for i in split[:3]))
assert split and sorted(seen[0]) == sorted(seen[1])

# %% [markdown]
# 步调完全一致、只差半毫秒，仍有消息恰好落在两个 rank 取消息的时刻之间：晚取的 rank 1 在这一步就处理它，rank 0 要到下一步。消息一条不少，顺序也一样，错的是“在哪一步”。比如某一步 rank 1 把一个新请求和 3 个在跑的请求拼成一批，rank 0 只拼了 3 个：两边的张量形状都不一样，TP 的 all_reduce 要么卡住，要么把错的行加在一起。
#
# ## rank 0 说了算：转发原始字节，广播条数
#
# 于是只让 rank 0 收外界的消息。它每一步取走 backend（`SchedulerConfig` 里的地址名，tokenizer 进程往这里推）里已经到达的全部消息，把原始字节原样转发到 broadcast（另一个地址名），再用 gloo 进程组广播“这一步有几条”。转发用 [PUB/SUB](../glossary.md#pub-sub)（第 12 章的 `ZmqPubQueue` / `ZmqSubQueue`）：一个 PUB 把每一帧复制给所有已经订阅上的 SUB。一个发件方、好几个收件方，所以这里由发件的 PUB 一方 bind，是“收件方 bind”的唯一例外。

# %% tags=["remove-input"]
listing("minisgl/scheduler/io.py", "SchedulerIO._receive_from_tokenizer")

# %% tags=["remove-input"]
listing("minisgl/scheduler/io.py", "SchedulerIO._receive_from_rank0")

# %% [markdown]
# 其他 rank 按广播来的条数从 SUB 取，正好这么多条；已经到了、但不在这一步里的帧留在队列里，下一步再取。转发的是 rank 0 收到的字节，不解码再编码：省一次序列化，也保证每个 rank 解出来的是相同的消息。`agree_count` 把条数放进一个 CPU 上的 int64 张量，经专门的 gloo 组 `dist.broadcast`（[条数广播](../glossary.md#count-broadcast)）：GPU 上默认的进程组是 NCCL（NVIDIA 的 GPU 通信库），只收显存里的张量。
#
# ??? note "深入：为什么先转发、后广播"
#     rank 1 拿到条数以后会阻塞地 `get_raw()` 正好这么多次。rank 0 先把帧发出去，rank 1 要的字节在它拿到条数之前就已经在路上了；反过来也不会错（`get_raw()` 会等），只是 rank 1 多等一会儿。
#
# ## 没事可做时：先核对，再等在 ZMQ 上
#
# 没有能跑的请求时（`blocking=True`），先做空闲时的事（核对 KV 页，见第 8 章），再阻塞地等第一条消息：

# %% tags=["remove-input"]
listing("minisgl/scheduler/io.py", "SchedulerIO.receive_msg")

# %% [markdown]
# 这时 rank 0 等在 PULL 上，rank 1 等在 SUB 上，都不在 gloo 的广播里：gloo 的[集合通信](../glossary.md#collective)（每个 rank 都要到场的通信）有超时，一个夜里没人用的服务不该因此崩掉。等到的第一条不计入条数，rank 0 照样先转发它。`blocking` 由 `runnable` 决定，而各 rank 的状态相同，所以它们同时开始等、同时醒来，广播的次数也始终一样。
#
# ## 开始之前握手：第一条消息不丢
#
# PUB 只把帧发给订阅已经生效的 SUB。SUB 的 `connect()` 立即返回，连接和订阅在后台的 I/O 线程里完成，这之前发出的帧直接丢掉，不报错（[迟到的订阅者](../glossary.md#slow-joiner)）。`examples/ch14_pubsub.py` 把它量出来：发布者扮演 rank 0，两个订阅者线程扮演 rank 1、rank 2，走真实的 ipc 套接字；两边建好套接字后过一道[屏障](../glossary.md#barrier)（所有线程都到了才往下走，相当于上游启动时的 `sync_all_ranks()`），然后发布者立即发 500 条：

# %% tags=["milestone"]
# NBVAL_IGNORE_OUTPUT
import sys

import zmq

sys.path.insert(0, "examples")  # 本章的演示脚本
from ch14_pubsub import broadcast_round, describe, hwm_round

N = 500
plain = broadcast_round(N)
late_bind = broadcast_round(N, connect_first=True)
with_handshake = broadcast_round(N, connect_first=True, handshake=True)
print(describe("先 bind 后 connect，屏障后立即发", plain, N))
print(describe("先 connect 后 bind，屏障后立即发", late_bind, N))
print(describe("先 connect 后 bind，探针握手后再发", with_handshake, N))
probe = zmq.Context.instance().socket(zmq.SUB)
print("SUB 连不上时隔多久重试（RECONNECT_IVL，毫秒）：", probe.getsockopt(zmq.RECONNECT_IVL))
probe.close()
assert plain["prefix"] and late_bind["prefix"] and max(late_bind["lost"]) > 0  # 丢的总是开头连续的一段
assert with_handshake["lost"] == [0, 0]

# %% [markdown]
# 屏障挡不住：它只说明每个线程都调用过 `connect()`，不说明订阅已经生效，最后连上的订阅者常常丢掉开头几条（第一行）；订阅者先 connect、发布者后 bind 时（几个进程一起启动，谁先谁后没有保证）丢得更多，SUB 要等重连的定时器到点才重试。握手之后一条不丢（第三行）。调度器的 rank 1 若丢一条，之后每一步按条数取到的都是后一条消息，所以 `SchedulerIO` 转发之前先握手：

# %% tags=["remove-input"]
listing("minisgl/scheduler/io.py", "SchedulerIO._wait_for_subscribers")

# %% [markdown]
# “听到过”就说明订阅已经生效；此后同一个 PUB 发出的帧按顺序送达，`_READY` 之后的第一帧就是第一条真消息。本章的测试在调度器启动之前就往 backend 里排好 50 条消息，rank 1 一条不少。
#
# ??? note "深入：丢多少为什么每次不同；上游的窗口；XPUB"
#
#     上面每行丢几条随机器而变。先 connect 后 bind 时，SUB 的重试间隔是 `RECONNECT_IVL`（100 ms，libzmq 再加 0 到 100 ms 的随机量），哪个订阅者丢多少，看它的定时器落在哪里。
#
#     上游每个调度器进程在 `Scheduler.__init__` 的最后建 I/O（rank 0 bind PUB，其他 rank connect SUB），各进程之间不排先后，然后 `sync_all_ranks()`：正是上面第一、二行的设置。第一条广播要等第一个请求，启动器还要等 tokenizer 进程就绪、再启动 uvicorn，通常已经过了这段窗口；请求恰好在窗口里到达，rank 1 就漏一条，要么一直等下去，要么把下一条当成这一条。
#
#     ZMQ 的 XPUB 套接字每当有订阅者订阅就能 `recv()` 到一条订阅消息（设 `XPUB_VERBOSE` 后每个订阅者都报上来），发布者数到 n 条就知道都就绪了。我们仍用普通 PUB 加探针：只用到已有的两种队列，而且“订阅者真的收到过一帧”是最直接的证据。
#
# 订阅生效之后还有一种丢法：PUB 给每个 SUB 排队的帧到了[高水位](../glossary.md#high-water-mark)，新帧直接丢掉，PUB 不阻塞。订阅者握手之后不读，发布者一口气发 20000 条：

# %%
# NBVAL_IGNORE_OUTPUT
pub_probe = zmq.Context.instance().socket(zmq.PUB)
sub_probe = zmq.Context.instance().socket(zmq.SUB)
print("默认高水位（条）：PUB 发送", pub_probe.getsockopt(zmq.SNDHWM), "，SUB 接收", sub_probe.getsockopt(zmq.RCVHWM))
pub_probe.close()
sub_probe.close()
kept = hwm_round(20_000)
print(f"默认高水位：事后读到 {kept} 条，其余被丢掉")
kept_all = hwm_round(20_000, hwm=0)
print(f"两端都设 hwm=0：事后读到 {kept_all} 条")
assert kept < 20_000 and kept_all == 20_000

# %% [markdown]
# 一大批请求同时到达，一步转发的帧就可能超过高水位，rank 1 按条数等一条永远不来的帧，rank 0 下一次广播时卡到 gloo 超时。所以 `SchedulerIO` 建 PUB 和 SUB 时给 `hwm=0`（不设上限，必须在 bind/connect 之前设）：帧宁可在内存里排队。测试里一步转发 1000 多条（共 3000 条），rank 1 一条不少。
#
# ## run_forever：收、处理、走一步、发
#
# 服务模式的主循环（[服务循环](../glossary.md#serving-loop)）把这些连起来，一步就是一次循环：

# %% tags=["remove-input"]
listing("minisgl/scheduler/scheduler.py", "Scheduler.run_forever")

# %% tags=["remove-input"]
listing("minisgl/scheduler/scheduler.py", "Scheduler._process_one_msg")

# %% [markdown]
# `add_req` 对不合法的请求抛 `ValueError`（第 7 章写的检查），这里把它变成一条 `RejectMsg` 发回去，API server 就能回一个 400，而不是让客户端一直等。重叠与否都走同一个 `step()`：重叠时这一步发出新的一批、处理上一批的结果（第 11 章）。在本进程里起一个调度器线程、扮演 tokenizer 进程试一下：

# %%
import logging

import torch

from minibook.hf import hf_greedy
from minibook.models import tiny_qwen3
from minisgl.core import SamplingParams
from minisgl.message import (BaseBackendMsg, BaseTokenizerMsg, BatchBackendMsg, BatchTokenizerMsg, ExitMsg,
                             RejectMsg, UserMsg)
from minisgl.scheduler import Scheduler, SchedulerConfig
from minisgl.utils.mp import ZmqPullQueue, ZmqPushQueue

log_lines = []


class KeepLines(logging.Handler):
    def emit(self, record):
        log_lines.append(record.getMessage())


logging.getLogger("minisgl.scheduler.scheduler").handlers = [KeepLines()]  # 日志行带时间，收下来再打印

ipc_dir = new_ipc_dir()
config = SchedulerConfig(model_path=tiny_qwen3(), ipc_dir=ipc_dir, max_running_req=4, page_size=2,
                         num_page_override=64, max_seq_len_override=48)
tokenizer_side = ZmqPullQueue(config.zmq_detokenizer_addr, create=True, decoder=BaseTokenizerMsg.decoder)
to_scheduler = ZmqPushQueue(config.zmq_backend_addr, create=False, encoder=BaseBackendMsg.encoder)
sched = Scheduler(config)  # 不是离线模式：自己建一个单 rank 的 SchedulerIO
loop = threading.Thread(target=sched.run_forever)
loop.start()

prompt = torch.tensor([785, 6421, 314, 4649, 314], dtype=torch.int32)
to_scheduler.put(BatchBackendMsg([
    UserMsg(0, prompt, SamplingParams(max_tokens=6, ignore_eos=True)),
    UserMsg(1, torch.arange(45, dtype=torch.int32), SamplingParams(max_tokens=10)),  # 45 + 10 > 48
]))
tokens, finished = [], False
while not finished:
    msg = tokenizer_side.get(timeout=30_000)
    for reply in msg.data if isinstance(msg, BatchTokenizerMsg) else [msg]:
        if isinstance(reply, RejectMsg):
            print(f"RejectMsg：{reply.reason}")
        else:
            tokens.append(reply.next_token)
            finished = reply.finished
to_scheduler.put(ExitMsg())
loop.join(timeout=30)
sched.shutdown()
for q in (tokenizer_side, to_scheduler):
    q.stop()
shutil.rmtree(ipc_dir)
print("请求 0 的输出：", tokens)
print("HF 的贪心：    ", hf_greedy(tiny_qwen3(), prompt.tolist(), 6))
print("调度器的日志：\n  " + "\n  ".join(log_lines))
assert tokens == hf_greedy(tiny_qwen3(), prompt.tolist(), 6) and not loop.is_alive()

# %% [markdown]
# 一个包里的两个请求，不合法的那个被拒绝，另一个照常生成、与 HF 逐 token 相同；`ExitMsg` 让 `run_forever` 返回，线程结束。日志里的两行空闲记录是每次阻塞之前的页面核对：开始时一页没用，结束后空闲页加上前缀缓存里的页仍是总数 64。
#
# ## 消息一样，批也要一样：decode 的顺序
#
# 条数对齐保证各 rank 在同一步处理同样的消息；拼批本身也必须只依赖这些消息。第 7 章的 `DecodeManager` 用 dict 存在跑的请求，批里的顺序就是接纳的顺序：

# %% tags=["remove-input"]
listing("minisgl/scheduler/decode.py", "DecodeManager.schedule_next_batch")

# %% [markdown]
# [上游](../glossary.md#upstream)当时用 set 存放在跑的 `Req`，批的顺序是 set 的迭代顺序，而 `Req` 按对象地址哈希：两个进程里的地址不同，顺序就可能不同（上游 #113 改成按 uid 排序）。main 里故意做错的版本用字符串的 set，因为字符串的哈希每个进程随机加盐，可以用 `PYTHONHASHSEED` 固定下来、结果可复现：

# %% tags=["remove-input"]
listing("examples/ch14_scheduler_io.py", "OrderedDecodeManager")

# %%
import subprocess
import sys

code = "print(list({f'req-{uid}' for uid in (100, 101, 102, 103)}))"
for seed in ("0", "1"):
    order = subprocess.run([sys.executable, "-c", code], env={"PYTHONHASHSEED": seed}, capture_output=True,
                           text=True, check=True).stdout.strip()
    print(f"PYTHONHASHSEED={seed}：{order}")

# %% [markdown]
# 同样 4 个请求，两个进程迭代出两种顺序。没有固定种子时，每个进程启动时随机选一个，两个 rank 几乎总是不同。
#
# ## 运行
#
# 本章的 main 在本章的树里真实跑出来的输出（两个进程，消息到达的时机和计时每次都不同，这一格的输出测试不重跑比较）：

# %% tags=["milestone"]
# NBVAL_IGNORE_OUTPUT
run("python examples/ch14_scheduler_io.py")

# %%
# NBVAL_IGNORE_OUTPUT
import re

out = output_of("python examples/ch14_scheduler_io.py")
bcast_us, step_ms = map(float, re.search(r"平均每次 (\d+) µs；decode 一步（两次拼批之间）中位数 ([\d.]+) ms", out).groups())
print(f"条数广播每次 {bcast_us:.0f} µs，占这次 decode 一步（{step_ms:.1f} ms）的 {bcast_us / 1e3 / step_ms:.1%}；"
      f"一步越短占比越大：一步 5 ms 时是 {bcast_us / 1e3 / 5:.0%}")

# %% [markdown]
# 值得注意的地方：
#
# - 第 1 轮每一步两个 rank 的批哈希都相同，包括中途才到的请求、被拒绝的请求和中途的取消：它们在两个 rank 的同一步被处理。
# - 第 2 轮消息还是一样（同一个 `SchedulerIO`），只有 decode 的顺序依赖各进程的哈希种子：第一批 decode（头 4 个请求）起就不同，相同的只有 prefill 和只剩一个请求的 decode（“相同的几步”那一行）。若模型按 rank 切分，那一步的 all_reduce 会把行加到别的请求上。
# - 两轮里完成的请求 token 完全相同：模型没有切分时，批内顺序不改变每个请求的结果，所以这个错在单卡上、在这个演示的输出里都看不出来，只能比较批本身。
# - 条数广播每步一次，每次的开销是“条数广播的开销”下第一行的微秒数，上面一格把它换算成占 decode 一步的比例。最后一行是运行中 rank 0 每步停在广播里的时间：除了广播本身，还有等后到的 rank 的时间（两个 rank 在那里对齐步调），所以它随两边的步调差而变，机器忙时会长得多。

# %% [markdown]
# ## 与上游的差异
#
# - 我们把收发写成组合进来的对象（`Scheduler(config, io)`），上游的 `Scheduler` 继承 `SchedulerIOMixin`、按 rank 换上不同的收发函数，因为组合让测试和演示能换一套收发（两份完整模型当两个 rank）。`python/minisgl/scheduler/io.py` · `SchedulerIOMixin`
# - 我们转发之前握手、PUB/SUB 设 `hwm=0`，上游启动时只过一道屏障、用默认高水位 1000，因为屏障通过时订阅未必生效、一步超过 1000 帧会丢帧，两种情况其他 rank 都会永远等下去。`python/minisgl/server/launch.py` · `_run_scheduler`，`python/minisgl/scheduler/io.py` · `SchedulerIOMixin._recv_msg_multi_rank0`
# - 请求不合法时我们回 `RejectMsg`；上游对超长的提示只记一行警告、把请求丢掉（客户端一直等），`max_tokens` 超出时截短并记一行警告。`python/minisgl/scheduler/scheduler.py` · `Scheduler._process_one_msg`
# - decode 批按接纳顺序；上游（20fcd7f）按 `Req` 的 set 迭代，各 rank 的顺序可能不同。`python/minisgl/scheduler/decode.py` · `DecodeManager.schedule_next_batch`
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 按 rank 换上收发函数：`python/minisgl/scheduler/io.py` · `SchedulerIOMixin.__init__`（第 27～65 行）
# - 单 rank 收消息：`python/minisgl/scheduler/io.py` · `SchedulerIOMixin._recv_msg_single_rank`（第 79～86 行）
# - rank 0 收、广播条数、转发：`python/minisgl/scheduler/io.py` · `SchedulerIOMixin._recv_msg_multi_rank0`（第 88～107 行）
# - 其他 rank 按条数收：`python/minisgl/scheduler/io.py` · `SchedulerIOMixin._recv_msg_multi_rank1`（第 109～122 行）
# - 只有 rank 0 回复：`python/minisgl/scheduler/io.py` · `SchedulerIOMixin._reply_tokenizer_rank0`（第 124～130 行）、`python/minisgl/scheduler/io.py` · `SchedulerIOMixin._reply_tokenizer_rank1`（第 132～133 行）
# - 处理收到的消息：`python/minisgl/scheduler/scheduler.py` · `Scheduler._process_one_msg`（第 169～198 行）
# - 启动时的 barrier 和主循环：`python/minisgl/server/launch.py` · `_run_scheduler`（第 16～37 行）、`python/minisgl/scheduler/io.py` · `SchedulerIOMixin.sync_all_ranks`（第 76～77 行）
# - 广播的地址：`python/minisgl/scheduler/config.py` · `SchedulerConfig.zmq_scheduler_broadcast_addr`（第 31～33 行）

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch14_scheduler_io.py`，全部用真进程（spawn）和新建的 ipc 目录，测试进程扮演 tokenizer 进程：单 rank、关掉重叠时，输出与 HF 逐 token 相同，不合法的请求和同号的请求收到 `RejectMsg`，取消的请求不再有结果、空闲时 KV 页核对通过，`ExitMsg` 让进程退出码为 0；两个 rank、重叠调度时，每次 `receive_msg` 收到的消息和每一批都相同，只有 rank 0 回复（每个 token 只收到一次），启动前排好的 50 条消息 rank 1 一条不少；把 decode 顺序换成字符串 set、两个 rank 用不同的哈希种子，批就不同了，而且不同的只是顺序：

# %% tags=["remove-input"]
listing("tests/test_ch14_scheduler_io.py", "test_process_local_decode_order_breaks_agreement")

# %%
run("python -m pytest -q --color=no tests/test_ch14_scheduler_io.py -k io_checks")

# %% [markdown]
# 本章改了前面章节的 `scheduler/config.py` 和 `scheduler/scheduler.py`，`steps.py check 14` 也会在本章的树里重跑前面各章的测试：离线的 `LLM.generate` 不经过收发，结果不变。

# %% [markdown]
# ## 怎么讲清楚
#
# 多个 TP rank 各跑一个调度器，它们每一步必须拼出一模一样的批，否则 all_reduce 会把不同请求的部分和加在一起。三件事保证这一点：只有 rank 0 收外界的消息，原样转发给其他 rank，并用 gloo 广播每一步的条数，于是同一条消息在所有 rank 的同一步处理；转发之前握手、不设高水位，一帧都不丢；拼批只依赖消息本身，不依赖 set 顺序、地址这类进程本地的东西。要记住的数：两个 rank 取消息的时刻只差半毫秒，就有消息落在不同的步里。代价是每步多一次一个整数的广播。

# %% [markdown]
# ## 练习
#
# 1. **把条数换成字节**。如果 rank 0 广播的不是条数，而是这一步全部消息拼起来的字节（不要 PUB/SUB），有什么好处和坏处？
# 2. **ExitMsg 和在途的一批**。重叠调度时，`ExitMsg` 到达时可能还有一批在途。`run_forever` 直接返回，这一批的结果去哪了？调用方接下来该做什么？
# 3. **挑战：检测不一致**。设计一个便宜的检查，让各 rank 在拼出的批不一致时立刻报错而不是算出错的结果，并估计它每步的开销。
#
# ??? success "参考答案"
#
#     1. 好处：一次集合通信同时送到条数和内容，不需要 PUB/SUB，也就没有迟到的订阅者。坏处：gloo 广播要先知道长度（要么先广播长度、再广播内容，两次），大的提示每步都要经 gloo 复制给每个 rank；上游的做法让大块字节走 ZMQ，gloo 只传一个整数。
#     2. 它的结果没有处理，资源也没还：`run_forever` 返回时状态原样留着。调用方接着调用 `shutdown()`，先等在途的前向做完再拆引擎；要继续服务，再调用一次 `run_forever()`，下一步就会处理它。
#     3. 每步把这一批的哈希（例如 uid 和本步 token 数的一个 64 位摘要）放进一个 int64 张量，对 `[h, -h]` 做一次 all_reduce(MIN)，得到最小值和负的最大值，两者不等就报错。它和条数广播一样是一个整数的集合通信，每步多几百微秒；也可以只在调试时打开，或每隔 k 步查一次。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 42   # 把第 42 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 42    # 判题
# python practice/judge.py hint 42    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - 服务模式的一步：`receive_msg`（没事可做时先核对 KV 页、再阻塞地等）→ 逐条 `_process_one_msg` → `step()` → `send_result`；收到 `ExitMsg` 时返回。
# - 多个 rank：rank 0 从 backend 取走已到的消息，原样转发到 PUB，再经 gloo 广播条数；其他 rank 从 SUB 正好取这么多条。阻塞等到的第一条不计数，各 rank 等在 ZMQ 上。
# - PUB/SUB 有两种丢法：订阅生效之前发的帧（迟到的订阅者，屏障挡不住），和超过高水位的帧。转发之前握手、两端 `hwm=0`，一帧不丢；只有 rank 0 回复。
# - 不合法的请求变成 `RejectMsg`；拼批不能依赖进程本地的东西：decode 批按接纳顺序，不按 set。
