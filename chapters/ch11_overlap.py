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
# # 第 11 章 重叠调度
#
# 到第 10 章为止，调度器的一步是“准备这一批 → 前向 → 处理结果”，CPU 忙的时候设备闲着，设备忙的时候 CPU 等着。[重叠调度](../glossary.md#overlap-scheduling)改成“先发出这一批，再处理上一批”。本章在 CPU 上把它做成真的：前向交给一个工作线程，一个 future 代替 CUDA 事件，守住结果晚一步才知道带来的四条规矩；输出仍与 Hugging Face 逐 token 一致，测量说清楚它在哪里被 [GIL](../glossary.md#gil) 吃掉。

# %% tags=["remove-cell"]
from minibook.page import *
setup(11)

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 重叠时处理第 N 批的结果，为什么不能用 `req.can_decode` 判断请求是否结束？
# 2. 一个请求在第 N 批采样到 EOS，它会不会出现在第 N+1 批里？第 N+2 批呢？
# 3. 请求结束时，为什么不能马上把它的页表行还回去？
# 4. CPU 上把前向放到另一个线程，一步最多能省多少时间？什么样的 CPU 工作省不下来？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 处理第 N 批时第 N+1 批已经发出，`complete_one()` 已经让 `device_len` 多走了一步，`can_decode` 会提前一个 token 变成 False。要看 CPU 上已经拿到的 token 数。
#     2. 会出现在第 N+1 批里（它在知道 EOS 之前就发出了），那个 token 丢掉；第 N+2 批不会，处理第 N 批时它已经离开了 decode 队列。
#     3. 在途的第 N+1 批还要往这一行的 token 池写新 token；行要是已经给了新请求，新请求的提示会被改掉一个 token。要等包含它的最后一批做完再还。
#     4. 最多省下 CPU 那两段（准备、处理）的时间，而且只有不和前向抢 GIL 的部分省得下来。纯 Python 的工作一直拿着 GIL，前向线程每发一个算子都要等它，省不下来，甚至更慢。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章改 `engine/engine.py`（工作线程）、`scheduler/scheduler.py`（重叠的一步）、`env.py`（开关）、`__init__.py`（线程的等待方式）；`examples/` 下是 main 和测量脚本。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch11_overlap.py`：同样 5 个请求（其中一个对话会答到 EOS），重叠开、关各跑一遍，输出相同、都与 HF 一致，并数出每种模式算了多少个 token。`python tools/steps.py check 11` 会跑它和本章的测试；只想跑 main：
#
# ```bash
# python tools/steps.py run 11 -- python examples/ch11_overlap.py
# python tools/steps.py run 11 -- python examples/ch11_steps.py   # 这一页的测量，在你的机器上
# ```
#
# ![上：不重叠时一步是准备、前向、处理三段之和；下：重叠时前向在工作线程上接连执行，调度器线程发出第 N+1 批再处理第 N 批；底部是四条规矩](../assets/ch11_overlap.svg)
#
# ## 先量：不重叠时，前向在等 CPU
#
# `examples/ch11_steps.py` 用真实的调度器和引擎跑 decode，把每一步拆成三段计时：准备（选批、分配槽位、元数据）、前向、处理结果。再在“处理”里注入一段 20 ms 的 `time.sleep`，代替真实服务里发结果、等网络这类不占 CPU 的工作：

# %% tags=["remove-input"]
listing("examples/ch11_steps.py", "decode_step_ms")

# %%
# NBVAL_IGNORE_OUTPUT
import os
import sys
import time

import torch

sys.path.insert(0, "examples")
from ch11_steps import (compare, decode_step_ms, gil_profile, make_llm, print_breakdown, python_work,
                        sleep_work)
from minibook.hf import encode, hf_greedy
from minibook.models import tiny_qwen3
from minisgl.core import SamplingParams

path = tiny_qwen3()
NUM_REQS, MAX_TOKENS = 8, 12
rows = {}
for name, work in (("没有注入", None), ("注入 20 ms sleep", sleep_work(20))):
    llm = make_llm(path, overlap=False, num_reqs=NUM_REQS)
    rows[name] = decode_step_ms(llm, NUM_REQS, MAX_TOKENS, work)
    llm.shutdown()
print(f"tiny Qwen3，{NUM_REQS} 个请求一起 decode，不重叠，每步中位数（ms，随机器和负载而变；"
      f"机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}，{os.cpu_count()} 个核）")
for name, r in rows.items():
    print(f"  {name:<14} 一步 {r['一步']:6.2f} = 准备 {r['准备']:5.2f} + 前向 {r['前向']:6.2f}"
          f" + 处理 {r['处理']:6.2f}")

# %% [markdown]
# 不重叠时一步就是三段之和：注入 20 ms，一步就长 20 ms 左右，这段时间里前向一个算子都没跑。调度器自己的两段只有零点几毫秒到一毫秒，这决定了重叠在 CPU 上最多能省多少。
#
# ## CPU 上的流：一个工作线程，一个 future 当事件
#
# GPU 上内核排进流里就返回，事件标出“流上排在它前面的活”。CPU 上没有流，我们用一个只有一个线程的线程池模仿：任务按提交的先后执行（FIFO），`submit` 返回的 future 就是事件。

# %% tags=["remove-input"]
listing("minisgl/engine/engine.py", "CpuStream")

# %% [markdown]
# ??? note "`CpuEvent`：把 future 包成 CUDA 事件的样子"

# %% tags=["remove-input", "fold"]
listing("minisgl/engine/engine.py", "CpuEvent")

# %% [markdown]
# 只有一个线程，排在后面的任务一定看得到前面任务写下的结果，这和一条流的保证相同。Engine 在调度器要求重叠时才建这个线程（`start_worker()`），第 6、7 章的同步用法不变。
#
# ??? note "深入：出错会粘住；任务在 inference_mode 里"
#
#     一个任务失败，排在后面的任务不再执行，之后的每个事件、每次提交都在调用线程上抛出同一个异常，调度器不会把没人写过的结果张量当成 token 交出去。`inference_mode` 只对进入它的线程有效：服务在 `inference_mode` 里建调度器，token 池是 inference 张量，工作线程不进去就写不了它。
#
# `forward_batch`：

# %% tags=["remove-input"]
listing("minisgl/engine/engine.py", "Engine.forward_batch")

# %% [markdown]
# 结果张量先占好位置，前向交给工作线程，`complete_one()` 留在调用线程上、发射时做：调度器马上就能按新的长度准备下一批。把工作线程堵住，看 `forward_batch` 是不是真的不等：

# %%
import threading

llm = make_llm(path, overlap=True, num_reqs=2)
prompt = encode(path, "The capital of France is")
gate = threading.Event()
llm.engine.enqueue(gate.wait)  # 堵住工作线程
llm.add_req(0, torch.tensor(prompt, dtype=torch.int32), SamplingParams(max_tokens=3, ignore_eos=True))
forward_input = llm._schedule_next_batch()
(req,) = forward_input.batch.reqs
start = time.perf_counter()
output = llm._forward(forward_input)
returned_ms = (time.perf_counter() - start) * 1e3
print(f"_forward 返回了，前向做完了吗：{output.copy_done.query()}")
print(f"请求的记账：cached_len={req.cached_len}, device_len={req.device_len}（提示 {len(prompt)} 个 token）")
gate.set()
output.copy_done.synchronize()
print("放行之后的 token：", output.next_tokens_cpu.tolist(), " HF：", hf_greedy(path, prompt, 1))
assert not returned_ms > 1000 and output.next_tokens_cpu.tolist() == hf_greedy(path, prompt, 1)
llm.shutdown()

# %% [markdown]
# 发出前向之后调度器线程立刻 `complete_one()`，而工作线程上的 LM 头还要读 `extend_len`：所以工作线程拿的是发射时的副本（`_launch_copy`，几个整数）。
#
# ??? note "深入：把副本换成原对象，看这个竞态"

# %% tags=["fold"]
import minisgl.engine.engine as engine_module

launch_copy = engine_module._launch_copy
engine_module._launch_copy = lambda batch: batch  # 错误的版本：工作线程直接读调度器线程正在改的请求
llm = make_llm(path, overlap=True, num_reqs=2)
bad = llm.generate([prompt], SamplingParams(max_tokens=4, ignore_eos=True))[0]["token_ids"]
llm.shutdown()
engine_module._launch_copy = launch_copy
print("读原对象：  ", bad)
print("HF：        ", hf_greedy(path, prompt, 4))
assert bad != hf_greedy(path, prompt, 4)

# %% [markdown]
#     前向还没跑到 LM 头，`extend_len` 已经从 5 变成了 1：prefill 取了第一个 token 的 logits，输出从第一个 token 起就错了。第 6 章把 `complete_one()` 放在发射时，是为了让调度器提前准备下一批；代价是：从发射那一刻起，前向只能读发射时的快照。
#
# ## 一步：先发出这一批，再处理上一批

# %% tags=["remove-input"]
listing("minisgl/scheduler/scheduler.py", "Scheduler.step")

# %% [markdown]
# 重叠时 `self.inflight` 是已经发出、还没处理的那一批；不重叠时它在同一步里就被处理掉。[token 池](../glossary.md#token-pool)的读写也要排队：

# %% tags=["remove-input"]
listing("minisgl/scheduler/scheduler.py", "Scheduler._forward")

# %% [markdown]
# 上一批的新 token 可能还没写进池子：取输入、前向、写回三件事都经 `engine.enqueue` 排在工作线程上，像排在同一条[流](../glossary.md#stream-event)里；`copy_done` 是写回之后的事件。
#
# ## 结果晚一步才知道：四条规矩
#
# [上游](../glossary.md#upstream)的重叠循环有四个竞态，每个都来自“处理第 N 批时，第 N+1 批已经发出”：

# %% tags=["remove-input"]
listing("minisgl/scheduler/scheduler.py", "Scheduler._process_last_data")

# %% tags=["remove-input"]
listing("minisgl/scheduler/scheduler.py", "Scheduler._finish_req")

# %% [markdown]
# **规矩 1：结束按拿到的 token 数判断。** 处理第 N 批时，第 N+1 批的 `complete_one()` 已经做了。看一个 `max_tokens=3` 的请求，每次处理结果时 CPU 上的 token 数和 `device_len`：

# %%
llm = make_llm(path, overlap=True, num_reqs=2)
process = llm._process_last_data
seen = []


def watch(last):
    replies = process(last)
    for r in last[0].batch.reqs:
        seen.append((len(r.input_ids) - len(prompt), r.device_len - len(prompt), r.can_decode))
    return replies


llm._process_last_data = watch
out = llm.generate([prompt], SamplingParams(max_tokens=3, ignore_eos=True))[0]["token_ids"]
llm.shutdown()
for got, device, can_decode in seen:
    print(f"拿到第 {got} 个 token 时：设备上已经排到第 {device} 个，can_decode={can_decode}")
print("输出：", len(out), "个 token")
assert len(out) == 3 and [s[2] for s in seen] == [True, False, False]

# %% [markdown]
# 拿到第 2 个 token 时 `can_decode` 已经是 False：上游按它判断结束，就只有 2 个 token；我们看 `len(req.input_ids) == req.max_device_len`，正好 3 个。
#
# **规矩 2：结束之后的 token 丢掉。** 请求在第 N 批遇到 EOS，第 N+1 批在知道之前已经发出，它在里面；处理第 N+1 批时它已在 `finished_reqs` 里，那个 token 跳过（运行一节的 main 数出了这多算的一个）。
#
# **规矩 3：行等在途的那一批做完再还**（[延迟释放](../glossary.md#deferred-release)）。在途的那一批还要往这一行 token 池写新 token。实验：只有 1 行，A 的第一个 token 就是 EOS，B 在排队；错误的版本结束就还行。
#
# ??? note "实验的代码（工作线程放慢 50 ms，输出在框下）"

# %% tags=["fold"]
from minisgl.llm import LLM


class ReleaseAtOnce(LLM):
    def _in_flight(self, req):  # 错误的版本：不管在途的那一批，请求一结束就还行
        return False


def run_a_then_b(cls):
    """A 的第一个 token 就是 EOS，B 在排队等 A 的行。返回 A 的输出、B 的提示在 token 池里变了几处。"""
    prompt_a, prompt_b = encode(path, "Hi"), encode(path, "def add(a, b): 1, 2, 3, 4,")
    llm = cls(path, max_running_req=1, page_size=2, num_page_override=64, max_seq_len_override=64)
    llm.eos_token_id = hf_greedy(path, prompt_a, 1)[0]
    forward = llm.engine._forward_and_sample
    llm.engine._forward_and_sample = lambda *args: (time.sleep(0.05), forward(*args))[1]
    outs = llm.generate([prompt_a, prompt_b], [SamplingParams(max_tokens=4),
                                               SamplingParams(max_tokens=4, ignore_eos=True)])
    in_pool = llm.token_pool[0, :len(prompt_b)].tolist()  # B 用的是第 0 行
    llm.shutdown()
    changed = [i for i, (x, y) in enumerate(zip(in_pool, prompt_b)) if x != y]
    return outs[0]["token_ids"], changed


# %%
for cls in (LLM, ReleaseAtOnce):
    a, changed = run_a_then_b(cls)
    print(f"{cls.__name__:<14} A 结束之后又报出的 token：{len(a)} 个，B 的提示在 token 池里被改掉的位置：{changed}")
    assert (a == [] and changed == []) == (cls is LLM)

# %% [markdown]
# 错误的版本里，A 在途那一批迟到的写入改掉了 B 提示里的一个 token，B 从此算的是另一个提示而不报错；A 多算的那个 token 也被报了出来。
#
# **规矩 4：取消在途的请求，同样等它那一批做完。** 上游取消时立即释放，而它的 prefill 还在途；处理那一批时又把前缀交给缓存一次，同一批页交了两次。我们的 `abort_req` 也走 `_finish_req`：资源等在途的那一批做完再还，那一批里它的结果跳过。
#
# ??? note "实验：照上游的做法写一个错误的版本"

# %% tags=["fold"]
import re


class FreeOnAbort(LLM):
    def abort_req(self, uid):  # 错误的版本：取消时立即释放，不管它的 prefill 还在途
        req = self.decode_manager.abort_req(uid)
        self._free_req_resources(req)
        return True


for cls in (LLM, FreeOnAbort):
    llm = cls(path, max_running_req=2, page_size=2, num_page_override=64, max_seq_len_override=64)
    for uid, text in enumerate(["The capital of France is", "def add(a, b):"]):
        llm.add_req(uid, torch.tensor(encode(path, text), dtype=torch.int32),
                    SamplingParams(max_tokens=5, ignore_eos=True))
    llm.step()  # 两个请求的 prefill 发出了，结果还没处理
    llm.abort_req(0)
    try:
        while llm.runnable:
            llm.step()
        print(f"{cls.__name__:<12} 跑完了，账目核对通过")
    except AssertionError as error:
        short = re.sub(r"Req\(uid=(\d+)[^)]*\)", r"Req(uid=\1, …)", str(error))  # 长的 repr 折起来
        print(f"{cls.__name__:<12} AssertionError：{short}")
    llm.shutdown()

# %% [markdown]
#     第 8 章 `cache_req` 里的断言拦住了第二次交付：请求的句柄在取消时已经交还了。
#
# ## GIL：重叠只藏得住放开 GIL 的时间
#
# CPU 上还有一件 GPU 上没有的事：两个线程共用一个解释器锁。前向线程每发射一个算子都要先拿到 GIL，算子执行时放开。
#
# ??? note "深入：300 个算子的“前向”，主线程同时做 30 ms 的三种工作"
#
#     `examples/ch11_gil.py`：两种方式轮流跑、各取中位数。下面是执行这一页时真实跑出来的，测试不会重跑（太慢，每次都不一样），看同一次运行里的对比。在你的机器上：`python tools/steps.py run 11 -- python examples/ch11_gil.py`

# %% tags=["milestone", "fold"]
# NBVAL_SKIP
run("python examples/ch11_gil.py")

# %% [markdown]
#     `time.sleep` 不拿 GIL，重叠的一步接近 max；torch 算子在执行时也放开 GIL，有空闲的核时一样藏得住，没有空闲的核时它就和前向抢核；纯 Python 一直拿着 GIL，前向线程每发一个算子都要等它让出来，重叠的一步接近甚至超过依次执行。最后几行改的是 `sys.setswitchinterval`：纯 Python 线程一次最多拿着 GIL 多久，到点解释器就强制换手。
#
# 在真实调度器里量：在“处理”里分别注入 20 ms 的 sleep 和纯 Python，两种模式轮流各跑 3 遍：

# %%
# NBVAL_SKIP
scenarios = {"没有注入": None, "20 ms sleep": sleep_work(20), "20 ms 纯 Python": python_work(20)}
measured = {name: compare(path, NUM_REQS, 24, rounds=3, work=work) for name, work in scenarios.items()}
for name, result in measured.items():
    print(f"== {name}")
    print_breakdown(result)
print("重叠 / 不重叠（一步）：" + "，".join(
    f"{name} {result[True]['一步'] / result[False]['一步']:.2f}" for name, result in measured.items()))
print(f"（机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}，{os.cpu_count()} 个核：负载高时数字会漂）")

plt = pyplot()
names = list(measured)
xs = range(len(names))
plt.bar([x - 0.2 for x in xs], [measured[n][False]["一步"] for n in names], width=0.4, label="不重叠")
plt.bar([x + 0.2 for x in xs], [measured[n][True]["一步"] for n in names], width=0.4, label="重叠")
plt.xticks(list(xs), names)
plt.ylabel("每步时间（ms，中位数）")
plt.title(f"tiny Qwen3，{NUM_REQS} 个请求 decode：每步在调度器线程上注入的工作")
plt.legend()
plt.show()

# %% [markdown]
# 注入 sleep 时，重叠把那 20 ms 藏在了前向后面，一步接近 max(前向, 工作)。注入纯 Python 时藏不住：两个线程轮流拿 GIL，“前向”一列被拖长，比值不小于 1。
#
# ??? note "深入：真实的一步有多少时间拿着 GIL"
#
#     用 `torch.profiler` 记下不重叠时每一段里的 aten 算子，一段时间减去其中算子的时间，剩下的就是解释器在跑 Python、拿着 GIL 的时间：

# %% tags=["remove-input", "fold"]
listing("examples/ch11_steps.py", "gil_profile")

# %% tags=["fold"]
# NBVAL_IGNORE_OUTPUT
for label, (ms, held) in gil_profile(path, NUM_REQS, 24).items():
    print(f"{label}：{ms:6.2f} ms/步，其中 {held:5.2f} ms 拿着 GIL（{held / ms:4.0%}）")

# %% [markdown]
#     调度器自己的两段，大部分时间在解释器里；前向的大部分时间在算子里。所以重叠之后，调度器那不到一毫秒的 Python 能和前向的算子并行，前向自己发射算子的那部分 Python 却要和它轮流拿 GIL。
#
# !!! warning "说清楚：在这台 CPU 上，真实引擎的重叠省得很少"
#     调度器的两段合起来不到一毫秒，重叠最多省下这一点（下面的记录里，32 个请求时快 5%），代价是每步几次线程交接和轮流拿 GIL（“没有注入”那一组的比值）。它省时间的地方是每步有一段**不拿 GIL** 的等待（第 12–15 章的服务收发消息），或者在 GPU 上。`MINISGL_DISABLE_OVERLAP_SCHEDULING=1` 关掉它，输出完全相同。
#
# ### 线程：前向用满每个核，等着的线程要睡
#
# `examples/ch11_threads.py` 在同一次运行里比 HF、重叠开和关、1 个和 2 个 torch 线程，机器空着和被 2 个忙进程占满。它要跑 10 分钟，执行这一页时不重跑，下面是 2026-12-03 在 2 核机器上的记录（工作线程用满每个核，OpenMP 用下面说的 PASSIVE 等待方式）。
#
# ??? note "记录：每格 3 遍的中位数，token/s（SmolLM2，float32）"
#
#     | 机器 | 线程 | HF 批 1 | 关 批 1 | 开 批 1 | 关 32 个 | 开 32 个 |
#     |---|---|---|---|---|---|---|
#     | 空着 | 1 | 18.0 | 22.9 | 21.9 | 75.0 | 78.0 |
#     | 空着 | 2 | 20.2 | 20.5 | 20.9 | 99.9 | 104.8 |
#     | 占满 | 1 | 14.9 | 15.8 | 14.8 | 51.3 | 50.1 |
#     | 占满 | 2 | 14.0 | 12.5 | 12.7 | 49.0 | 54.8 |
#
# 三件事。批大小 1 的 decode 卡在内存带宽上，第二个线程不帮忙；32 个请求时 2 个线程快 1.33 倍（99.9 对 75.0），所以前向用满每个核。重叠在 32 个请求时快 5%，批大小 1 时在抖动之内。机器占满时 2 个线程只慢一点（12.5 对 15.8）；等着的线程不睡的话，这一格会塌到 3～4。
#
# 办法是让等着的线程马上睡：`OMP_WAIT_POLICY=PASSIVE`。OpenMP 只在 torch 导入时读一次它，所以 `import minisgl` 在 torch 还没导入时替你设上（你设了的照你的）：

# %% tags=["remove-input"]
listing("minisgl/__init__.py")

# %% [markdown]
# ??? note "记录：`python examples/ch11_threads.py --wait-policy`，机器占满、2 个线程、批大小 1、不重叠，每格一个新进程（2026-12-02，那天的机器比上表慢），token/s"
#
#     | OMP_WAIT_POLICY | token/s |
#     |---|---|
#     | 没设 | 3.1 |
#     | PASSIVE | 8.8 |
#
# 同一次运行里，设了 PASSIVE 快 2.8 倍。
#
# ??? note "深入：还能怎样让调度器线程少占 GIL"
#
#     准备阶段的下标用张量一次算出（`_token_indices`），不按请求写 Python 循环；处理阶段只留必要的 Python（追加 token、判断结束）。再往下的办法是让前向本身少要 GIL：把整个前向交给一次编译好的图（计划中的第 18 章：CUDA 图在 CPU 上的替身），工作线程每步只进出解释器一次。

# %% [markdown]
# ## 运行
#
# 本章的 main，先看源码，再看它在本章的树里真实跑出来的输出：

# %% tags=["remove-input"]
listing("examples/ch11_overlap.py")

# %%
run("python examples/ch11_overlap.py")

# %% [markdown]
# 值得注意的地方：
#
# - 两种模式步数相同（22 步），输出相同，都与 HF 一致：重叠只改变先后，不改变结果。
# - 不重叠时算了 46 个 token、输出 45 个（EOS 不进输出）；重叠时算了 47 个，多出的是对话请求在 EOS 之后已经发出的那一步（规矩 2），丢掉了。
# - 按 `max_tokens` 结束的请求不多算：最后一批发出时 `complete_one()` 就让 `can_decode` 变成 False。

# %% [markdown]
# ## 与上游的差异
#
# - 我们在 CPU 上用一个工作线程和 future 代替流和事件；上游只跑 GPU，前向排在引擎的流上。`python/minisgl/scheduler/scheduler.py` · `Scheduler.overlap_loop`
# - 我们按 CPU 上拿到的 token 数判断结束；上游按 `not req.can_decode`，重叠时少生成一个 token。`python/minisgl/scheduler/scheduler.py` · `Scheduler._process_last_data`
# - 我们的结束和取消都等在途的那一批做完再还资源；上游立即释放，靠 `finished_reqs` 跳过第二次释放，行可能在在途时被新请求拿走，取消在途的 prefill 会把页缓存两次。`python/minisgl/scheduler/scheduler.py` · `Scheduler._process_one_msg`
# - 我们在 GPU 上只用引擎的一条流；上游另开一条调度流做元数据拷贝，拷贝和计算可以并行，代价是跨流的写入要自己排先后。`python/minisgl/scheduler/scheduler.py` · `Scheduler.__init__`
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 重叠的主循环：先发下一批，再处理上一批：`python/minisgl/scheduler/scheduler.py` · `Scheduler.overlap_loop`（第 83～106 行）
# - 开关 `MINISGL_DISABLE_OVERLAP_SCHEDULING`：`python/minisgl/scheduler/scheduler.py` · `Scheduler.run_forever`（第 120～131 行）
# - 调度流和引擎流：`python/minisgl/scheduler/scheduler.py` · `Scheduler.__init__`（第 46～76 行）
# - 重叠时留住在途那一批的输入张量，免得提前释放：`python/minisgl/scheduler/scheduler.py` · `ForwardInput`（第 35～39 行）、`python/minisgl/scheduler/scheduler.py` · `ForwardData`（第 42 行）
# - 等拷回完成再处理上一批，用 `finished_reqs` 跳过第二次释放：`python/minisgl/scheduler/scheduler.py` · `Scheduler._process_last_data`（第 138～167 行）
# - 拷回和事件：`python/minisgl/engine/engine.py` · `Engine.forward_batch`（第 191～206 行）
# - 取消时立即还行和页：`python/minisgl/scheduler/scheduler.py` · `Scheduler._process_one_msg`（第 169～198 行）、`python/minisgl/scheduler/scheduler.py` · `Scheduler._free_req_resources`（第 200～202 行）

# %% [markdown]
# ## 测试
#
# `tests/test_ch11_overlap.py`：重叠模式的输出与 HF 一致（页表只有 2 行、共享前缀、很小的 token 预算）；工作线程出错像 CUDA 一样粘住（取输入、前向、写回三处各注入一次错误，异常都从 `LLM.generate` 抛出来）；四个竞态各一个测试，每个都用“去掉那条规矩”的版本试过，会失败；`OMP_WAIT_POLICY` 的三种情形。规矩 3 的测试：
#
# ??? note "`test_race3_a_row_is_reused_only_after_the_inflight_write`"

# %% tags=["remove-input", "fold"]
listing("tests/test_ch11_overlap.py", "test_race3_a_row_is_reused_only_after_the_inflight_write")

# %%
run("python -m pytest -q --color=no tests/test_ch11_overlap.py -k race")

# %% [markdown]
# ??? note "第 7–10 章的测试在本章的树里为什么关掉重叠"
#
#     第 7–10 章的测试是按“一步当场返回这一步的结果”写的（数每一步的输出、某一步之后查页数），重叠时结果晚一步，这些断言就不成立了。`steps.py check 11` 重跑它们时，本章的 `tests/conftest.py` 让它们关掉重叠运行；重叠模式下的批量生成、前缀缓存、小 token 预算由本章自己的测试覆盖。

# %% [markdown]
# ## 怎么讲清楚
#
# 重叠调度是两段流水线：先发出第 N+1 批，再处理第 N 批，CPU 的准备和处理藏在前向后面，一步从三段之和变成最大值。代价是结果晚一步才知道：结束按拿到的 token 数判断；结束后的那个 token 丢掉；结束和取消的请求，资源等包含它的最后一批做完再还。CPU 上前向放在工作线程里，future 当事件；两个线程共用 GIL，每步注入的 20 ms sleep 藏得住，20 ms 纯 Python 藏不住。

# %% [markdown]
# ## 练习
#
# 1. **规矩 3 在 GPU 上**。我们在 GPU 上只用一条流：结束的请求要是立即还行，新请求的提示经锁页内存异步拷进 token 池，会不会被在途那一批的写入改掉？换成上游的两条流呢？
# 2. **`max_tokens=1` 的请求**。它的 prefill 一发出就 `can_decode=False`，`filter_reqs` 不会把它放进 decode 队列。如果这时取消它，`abort_req` 在哪里找到它？
# 3. **挑战：让前向少要 GIL**。前向的 Python 部分（每层十几个算子的发射）每步都要拿几百次 GIL。设计一种办法，让工作线程每步只拿几次 GIL，并说出它在本章测量里应当改变哪一列。
#
# ??? success "参考答案"
#
#     1. 一条流上不会：拷贝和前向、写回都按发出的顺序执行，在途那一批的写入一定先做完，新请求的提示后写进去。两条流就会：拷贝在调度流上、写入在引擎流上，谁先谁后没有保证，这正是上游要小心的地方（也是 SGLang 里“延迟释放行号”的修复）。
#     2. 它不在 decode 队列里，`decode_manager.abort_req` 找不到；`_find_inflight` 在已发出、还没处理的那一批里找到它，走同样的 `_finish_req`：结果丢掉，资源等那一批做完再还。
#     3. 把整个前向变成一次调用：例如用 `torch.jit.trace` 或 `torch.compile` 得到一个图，工作线程调用一次、在 C++ 里跑完全部算子，中间不回到解释器。它应当让注入纯 Python 时的“前向”一列不再被拖长，重叠的一步接近 max。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 33   # 把第 33 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 33    # 判题
# python practice/judge.py hint 33    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - 重叠的一步：发出第 N+1 批，再等第 N 批做完、处理它；一步从三段之和变成接近最大值。
# - CPU 上前向交给一个工作线程（`CpuStream`），`CpuEvent` 代替 CUDA 事件；工作线程读发射时的副本，token 池的取和写都排在它上面。
# - 四条规矩：按拿到的 token 数判断结束；结束后的 token 丢掉；结束、取消的请求都等在途的那一批做完再还行。
# - GIL 决定 CPU 上能藏住什么：不拿 GIL 的等待藏得住，纯 Python 藏不住；这台 CPU 上重叠省得很少，关掉它输出不变。

# %% tags=["remove-cell", "milestone-checklist"]
# 阶段二的里程碑页（docs/stages/schedule/index.md）引用这个单元的输出；章节页上不显示。
import re
import subprocess

from IPython.display import Markdown

from minibook import practice

collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                            "tests"], capture_output=True, text=True, check=True).stdout
total_tests = sum(1 for line in collected.splitlines() if "::" in line)
main_out = subprocess.run([sys.executable, "examples/ch11_overlap.py"], capture_output=True, text=True,
                          check=True).stdout
agree = len(re.findall(r"与 HF 一致：True", main_out))
same = main_out.count("两种模式的输出相同：True")
stage_ex = [ex for ex in practice.exercises() if 7 <= ex.chapter <= 11]
checks = [
    ("python tools/steps.py check 7-11", "逐章搭树、跑 main 和测试，汇总表下面是“合计：5 章通过，0 章失败”"),
    ("python tools/steps.py run 11 -- python examples/ch11_overlap.py",
     f"重叠开和关各跑一遍：{agree} 行“与 HF 一致：True”，“两种模式的输出相同：True”"),
    ("python tools/steps.py run 11 -- python -m pytest -q tests",
     f"收集到 {total_tests} 个测试（参数化展开后），没有 failed；只在 CUDA 上跑的几个是 skipped"),
    ("python tools/steps.py run 11 -- python examples/ch11_benchmark.py --quick",
     "和 HF 贪心参照逐 token 比的那几行全部一致；最后给出对 HF 的倍数（随机器而变）"),
    ("python practice/judge.py list",
     f"第 7–11 章的 {len(stage_ex)} 道题（第 {stage_ex[0].number}–{stage_ex[-1].number} 题）；逐道 start、test 做到通过"),
]
assert agree >= 1 and same >= 1
Markdown("\n".join(f"- [ ] `{cmd}`  \n  应当看到：{expect}" for cmd, expect in checks))
