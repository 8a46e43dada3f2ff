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
# # 第 7 章 调度器骨架与离线接口
#
# 第 6 章的迷你调度器把所有请求一次 prefill，然后陪最慢的那个跑到底：先结束的请求空出来的位置一直空着，后来的请求也无处可去。这一章写真正的[调度器](../glossary.md#scheduler)：请求先排队，每一步重新决定这一步算谁——有空位、页够就把队首的请求接进来，否则让在跑的请求各 decode 一个 token。我们按上游的骨架写出 `Scheduler` 的一步、管排队的 `PrefillManager`、管在跑请求的 `DecodeManager`，以及[离线接口](../glossary.md#offline-api) `LLM.generate`。同样 8 个请求，[连续批处理](../glossary.md#continuous-batching)比[静态批处理](../glossary.md#static-batching)少用四成多的步数，输出一个 token 都不变，无论怎么调度都与 Hugging Face 逐 token 相同。

# %% tags=["remove-cell"]
from minibook.page import *
setup(7)

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 调度器的一步要么全是 prefill、要么全是 decode。有新请求排队时先做哪种？代价是什么？
# 2. 接纳一个请求时，为什么按“提示 + `max_tokens` − 1 个 token”留 KV 页，而不是只留提示要的页？为什么减 1？
# 3. 一个请求什么时候结束？`LLM.generate` 的输出里有没有 EOS？
# 4. decode 批里请求的顺序为什么必须是确定的？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 先 prefill：新请求早一步进来，之后的 decode 批更大。代价是这一步在跑的请求一个 token 都不出。
#     2. 请求一旦接纳就不会被赶出去，只留提示的页，它 decode 到一半就可能没页可用。最后采样出的 token 请求就结束了，它不再进模型，不占槽位。
#     3. 在 CPU 上拿到新 token 后判断：已经有正好 `max_tokens` 个，或者不忽略 EOS 且这个 token 是 EOS。EOS 那一步照样报告给调用者，但 `generate` 不把它放进输出。
#     4. 采样器整批共用一个随机数流，顺序变了，同一个请求抽到的 token 就变了；TP 的各个 rank 各自拼批，顺序不一致就会抽出不同的 token。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章在 `minisgl/scheduler/` 里新建调度器的五个文件，新建离线接口 `minisgl/llm/` 和读分词器的 `minisgl/utils/hf.py`；`scheduler/__init__.py` 改为导出 `Scheduler`、`SchedulerConfig`。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch07_scheduler.py`：在 SmolLM2 和 tiny Qwen3 上用 `LLM.generate` 生成 5 个请求（token id 和文字混着给），页表只有 3 行，逐 token 与 HF 对照；再让一个聊天提示在 EOS 处停下，让一个太长的提示在门口报错。`python tools/steps.py check 7` 会搭出本章的树、跑这个 main 和测试；只跑 main：
#
# ```bash
# python tools/steps.py run 7 -- python examples/ch07_scheduler.py
# ```
#
# 本章的演示 `examples/ch07_batching.py` 在下一节先跑一遍。

# %% [markdown]
# ## 静态批处理：空出来的行一直空着
#
# 8 个请求同时到达，`max_tokens` 从 4 到 64 各不相同，页表只有 4 行（`max_running_req=4`）。静态批处理只在一个请求都没在跑时接纳新请求；它和本章的 `PrefillManager` 只差一条规则：

# %% tags=["remove-input"]
listing("examples/ch07_batching.py", "StaticPrefillManager")

# %% [markdown]
# 演示在 tiny Qwen3 上把两种做法各跑一遍（同一个调度器、同样的请求、`ignore_eos` 让每个请求正好生成 `max_tokens` 个），给每一步 `step()` 计时。时间随机器而变，步数不变：

# %% tags=["milestone"]
# NBVAL_IGNORE_OUTPUT
import sys

import torch

sys.path.insert(0, "examples")  # 本章的演示脚本
from ch07_batching import MAX_TOKENS, compare, report, runs
from minibook.models import smollm2, tiny_qwen3

traces = compare(tiny_qwen3())  # {"静态批处理": Trace, "连续批处理": Trace}
report(traces)
static, continuous = traces.values()
assert continuous.total < static.total

# %%
for name, t in traces.items():
    print(f"{name}：{len(t.phases)} 步，其中 prefill {t.phases.count('prefill')} 步；"
          f"批大小 {runs(t.batch_sizes)}")
assert (len(static.phases), len(continuous.phases)) == (120, 68)
assert static.tokens == continuous.tokens  # 换一种拼批方式，输出一个 token 都不变

# %% [markdown]
# 每一步的批大小画出来，横轴是时间（橙色是 prefill，蓝色是 decode）：

# %%
# NBVAL_IGNORE_OUTPUT
plt = pyplot()
fig, axes = plt.subplots(2, 1, sharex=True, figsize=(7.5, 4.4))
for ax, (name, t) in zip(axes, traces.items()):
    starts = [end - d for end, d in zip(t.step_ends, t.durations)]
    colors = ["#fb923c" if p == "prefill" else "#60a5fa" for p in t.phases]
    ax.bar(starts, t.batch_sizes, width=t.durations, align="edge", color=colors)
    ax.set(ylabel="批大小", ylim=(0, 4.6), title=f"{name}：{len(t.phases)} 步，{t.total:.2f} 秒")
axes[-1].set_xlabel("时间（秒）")
plt.tight_layout()
plt.show()

fig, ax = plt.subplots(figsize=(7.5, 3.0))
x = torch.arange(len(MAX_TOKENS))
for shift, (name, t) in zip((-0.2, 0.2), traces.items()):
    ax.bar(x + shift, t.latencies, width=0.4, label=name)
ax.set(xticks=x.tolist(), xticklabels=[f"{u}\n({n})" for u, n in enumerate(MAX_TOKENS)],
       xlabel="请求 uid（max_tokens）", ylabel="到达到结束（秒）", title="每个请求的延迟")
ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# 静态批处理的第一批里，4 个 token 的请求第 4 步就走了，它的行却要陪 64 个 token 的请求空等六十来步，批大小一路掉到 1，后面 4 个请求只能干等。连续批处理每当有行空出来，下一步就接进队首的请求，批大小几乎一直是 4，步数从 120 降到 68。排在后面的 4 个请求（uid 4–7）因此早结束得多；先进来的请求却不一定更快：它们要陪新请求 prefill，每步的批也更大（见延迟图）。
#
# ??? note "深入：步数少为什么就快——以及这台 CPU 上的一个意外"
#
#     decode 一步要把全部权重从内存读一遍，批里多几个请求，读权重的那部分不变，所以一步的时间涨得远比批大小慢；少走几步，总时间就少。上面 `report` 的最后两行是按批大小分开的 decode 一步平均时间。在执行这一页的机器上，批大小 2、3 的一步反而比 4 慢：这是矩阵乘库对只有两三行的矩阵选的算法不好，与调度无关。下面第一格单独量一个 lm_head 形状的矩阵乘，就能看到同样的现象。静态批处理大半时间跑在批大小 1～3 上，正好吃了这个亏，所以这里的时间差比单看步数还大一些。
#
#     第二格换成真权重的 SmolLM2（30 层）把演示再跑一遍：它太慢，测试不重跑，输出是执行这一页时的真实结果。
#
# 深入框里说的两次测量：

# %%
# NBVAL_IGNORE_OUTPUT
import time

weight = torch.randn(49152, 256)  # tiny Qwen3 的 lm_head：词表 × hidden
for rows in (1, 2, 3, 4, 8):
    x = torch.randn(rows, 256)
    x @ weight.T  # 预热
    start = time.perf_counter()
    for _ in range(20):
        x @ weight.T
    print(f"[{rows}, 256] @ [256, 49152]：{(time.perf_counter() - start) / 20 * 1000:.1f} 毫秒")

# %%
# NBVAL_SKIP
run("python examples/ch07_batching.py --model smollm2")

# %% [markdown]
# ## 一步四段：选批、准备、前向、收结果
#
# ![调度器的一步：① _schedule_next_batch 选批（prefill 优先）、② _prepare_batch 分配槽位并算好输入和写回的下标、③ _forward 从 token 池取输入、Engine 前向、新 token 写回 token 池、④ _process_last_data 在 CPU 上判断结束并释放资源；左边是调度器持有的 PrefillManager、DecodeManager、TableManager、PageAllocator 和 Engine；下方是 3 个请求在静态和连续批处理下每一步的批](../assets/ch07_scheduler_step.svg)
#
# `Scheduler` 构造时建好 Engine，再在 Engine 的页表上建 `TableManager` 和 `PageAllocator`，最后是两个管理器。它对外只有几个方法：`add_req` 收请求、`abort_req` 取消、`step` 走一步。一步的四段沿用上游的名字：

# %% tags=["remove-input"]
listing("minisgl/scheduler/scheduler.py", "Scheduler.step")

# %% [markdown]
# 没有能跑的请求时，`step` 调用 `run_when_idle` 并返回空列表；第 8 章在那里检查 KV 页有没有漏记。下面一段一段看。
#
# ## 选批：prefill 优先，先来先服务

# %% tags=["remove-input"]
listing("minisgl/scheduler/scheduler.py", "Scheduler._schedule_next_batch")

# %% [markdown]
# 只要队列里有请求能接纳，这一步就只做 prefill。前面批大小图里，连续批处理那几根批大小为 1 的橙色柱子就是代价：那一步在跑的 3 个请求一个 token 都没出。换来的是新请求早一步进入 decode 批，之后每一步都是满的 4 个。
#
# 排队的请求由 `PrefillManager` 管，它从队首起一个个试，[接纳](../glossary.md#admission)不了就停：

# %% tags=["remove-input"]
listing("minisgl/scheduler/prefill.py", "PrefillManager.schedule_next_batch")

# %% [markdown]
# 停下就是停下：排在后面的小请求哪怕放得下，也不许插队。这就是[先来先服务（FCFS）](../glossary.md#fcfs)，它保证大请求不会被一串小请求饿死。判断一个请求能不能进来的是 `PrefillAdder`：

# %% tags=["remove-input"]
listing("minisgl/scheduler/prefill.py", "PrefillAdder.try_add_one")

# %% [markdown]
# 三个条件：有空的页表行；[token 预算](../glossary.md#token-budget)（`max_extend_tokens`）放得下它的提示，队首第一个除外；它的最坏情况放得下。接纳之后它才占行、把提示写进 [token 池](../glossary.md#token-pool)，变成一个 `Req`。
#
# ## 按最坏情况留页：接纳了就不会半路没页
#
# 请求一旦接纳就一直跑到结束，本书不做抢占。所以接纳时要按它生成到第 `max_tokens` 个 token 为止算：提示 + `max_tokens` − 1 个 token 的页（最后采样出的 token 不再进模型）。在跑的请求也一样，它们将来还要的页先扣掉：

# %% tags=["remove-input"]
listing("minisgl/scheduler/decode.py", "DecodeManager.inflight_pages")

# %% [markdown]
# 让它在屏幕上失败一次。池子只有 7 页、每页 4 个 token，4 个请求各有 5 个 token 的提示、要生成 8 个：最坏各要 3 页，同时只放得下 2 个。先照本章的规则跑，再把 `inflight_pages` 换成“在跑的请求将来不再要页”：

# %%
from minisgl.core import SamplingParams
from minisgl.kvcache import OutOfPagesError
from minisgl.llm import LLM


def runs(batches: list[list[int]]) -> str:
    """连续相同的批并成一项：[0, 1]×5 表示这样的批连着 5 步。"""
    merged: list[list] = []
    for b in batches:
        if merged and merged[-1][0] == b:
            merged[-1][1] += 1
        else:
            merged.append([b, 1])
    return "、".join(f"{b}×{n}" if n > 1 else f"{b}" for b, n in merged)


def small_pool_run(forget_running: bool) -> None:
    llm = LLM(tiny_qwen3(), max_running_req=4, page_size=4, num_page_override=7, max_seq_len_override=28)
    if forget_running:  # 错误的版本：不给在跑的请求预留将来要的页
        llm.decode_manager.inflight_pages = lambda page_size: 0
    for uid in range(4):
        llm.add_req(uid, torch.tensor([60 + uid, 61, 62, 63, 64], dtype=torch.int32),
                    SamplingParams(max_tokens=8, ignore_eos=True))
    batches = []
    try:
        while llm.runnable:
            batches.append([o.uid for o in llm.step()])
        print(f"  每一步的批：{runs(batches)}")
        assert llm.page_allocator.num_free_pages == 7
    except OutOfPagesError as e:
        print(f"  每一步的批：{runs(batches)}\n  第 {len(batches) + 1} 步：OutOfPagesError：{e}")
    llm.shutdown()


print("按最坏情况留页：")
small_pool_run(forget_running=False)
print("不给在跑的请求留页：")
small_pool_run(forget_running=True)

# %% [markdown]
# 正确的版本里请求 2、3 在队列里等了 8 步，等 0、1 结束还了页才进来。错误的版本第 2 步看见还有 3 页空闲，就把请求 2 接了进来；可 0 和 1 走到第 9 个 token 时各要一页新页，第 6 步三个请求一共要 3 页，只剩 1 页，整批失败。没有抢占的调度器里，这时已经没有好办法了。留得保守的代价（池子没用满时也不接纳）第 8 章会量。
#
# ## 准备和前向：输入从 token 池取，新 token 写回 token 池
#
# 选好的批交给 `_prepare_batch`：整批分配槽位，算出每个 token 的位置，以及两组二维下标——输入在 token 池里的（行, 位置），和每个请求的新 token 要写回的（行, 列）：

# %% tags=["remove-input"]
listing("minisgl/scheduler/scheduler.py", "Scheduler._prepare_batch")

# %% [markdown]
# 新 token 放在前向之前的 `device_len`：Engine 发射前向时对每个请求 `complete_one()`，`device_len` 加 1，这个位置正好是下一步 decode 的输入。`_forward` 用这两组下标读、写 token 池，中间是第 6 章的 `forward_batch`：

# %% tags=["remove-input"]
listing("minisgl/scheduler/scheduler.py", "Scheduler._forward")

# %% [markdown]
# 倒数第二行把刚发射的请求交给 `DecodeManager`：prefill 完的请求从此进入 decode 批，`can_decode` 为假（已经到 `max_tokens`）的离开。看一个 prefill 批的两组下标：

# %%
llm = LLM(tiny_qwen3(), max_running_req=4, page_size=4, num_page_override=16, max_seq_len_override=16)
llm.add_req(0, torch.tensor([11, 12, 13], dtype=torch.int32), SamplingParams(max_tokens=4))
llm.add_req(1, torch.tensor([21, 22], dtype=torch.int32), SamplingParams(max_tokens=1))
fwd = llm._schedule_next_batch()
print("这一批：", fwd.batch)
print("输入下标  行：", fwd.input_tuple[0].tolist(), " 位置：", fwd.input_tuple[1].tolist())
print("写回下标  行：", fwd.write_tuple[0].tolist(), " 列：", fwd.write_tuple[1].tolist())
assert fwd.write_tuple[1].tolist() == [3, -1]
out = llm._process_last_data((fwd, llm._forward(fwd)))
print("结果：", out)
print("token 池第 0 行：", llm.token_pool[0, :5].tolist())

# %% [markdown]
# 请求 0 的新 token 写在第 0 行第 3 列，下一步 decode 从那里取。请求 1 的 `max_tokens` 是 1，prefill 采样出的就是它最后一个 token，没人再读，写到最后一列 `-1`：那一列永远不是提示的位置（提示 + `max_tokens` 不超过页表宽度），这一行交给下一个请求时，这次写入碰不到它的提示。请求 1 当场结束，`finished=True`。
#
# ## 结束在 CPU 上判断：正好 max_tokens 个，EOS 不进输出

# %% tags=["remove-input"]
listing("minisgl/scheduler/scheduler.py", "Scheduler._process_last_data")

# %% [markdown]
# 结束的条件只看 CPU 上已经拿到的 token：`len(req.input_ids) == req.max_device_len`，也就是正好生成了 `max_tokens` 个；或者不忽略 EOS、而这个 token 就是 [EOS](../glossary.md#eos)。结束的请求立刻还页、还行，它的行下一步就能给队首的请求。用 SmolLM2 的一个聊天提示看 EOS：

# %%
llm.shutdown()
llm = LLM(smollm2(), max_running_req=2, page_size=4, num_page_override=32, max_seq_len_override=64)
chat = llm.tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                         add_generation_prompt=True, tokenize=True, return_dict=False)
llm.add_req(0, torch.tensor(chat, dtype=torch.int32), SamplingParams(max_tokens=16))
replies = []
while llm.runnable:
    replies += llm.step()
print("最后两步：", replies[-2:])
print(f"EOS 是 {llm.eos_token_id} 号 token，生成了 {len(replies)} 个就停了（max_tokens=16）")
out = llm.generate([chat], SamplingParams(max_tokens=16))[0]
print("generate：", out)
assert replies[-1].next_token == llm.eos_token_id and replies[-1].finished
assert out["token_ids"] == [r.next_token for r in replies[:-1]]

# %% [markdown]
# 调度器照样把 EOS 那一步报告出来并标上 `finished`；`generate` 收集输出时跳过它（`ignore_eos=True` 的请求不跳过，EOS 对它只是普通 token）。

# %% [markdown]
# ## 太长的提示：当场报错，而不是悄悄丢掉
#
# 请求进门时 `add_req` 先检查：提示不能是空的，token id 要在词表里，uid 不能和排队中或在跑的请求重复，提示 + `max_tokens` 不能超过引擎放得下的 `max_seq_len`。有问题就对这个请求抛 `ValueError`，它不进队列，别的请求照常：

# %% tags=["remove-input"]
listing("minisgl/scheduler/scheduler.py", "Scheduler.add_req")

# %%
print("max_seq_len =", llm.engine.max_seq_len)
try:
    llm.add_req(1, torch.arange(100, 160, dtype=torch.int32), SamplingParams(max_tokens=8))
except ValueError as e:
    print("ValueError：", e)
assert not llm.runnable

# %% [markdown]
# 上游在收到用户消息时检查长度：提示本身就放不下时只打一行警告、把请求丢掉，不回任何消息，等结果的客户端就一直等下去；放得下提示、放不下 `max_tokens` 时悄悄把 `max_tokens` 调小。我们两种情况都报错，让调用者当场知道。
#
# ## decode 批的顺序：按接纳的先后
#
# `DecodeManager` 用一个 dict（uid → `Req`）存在跑的请求。dict 记得插入的顺序，decode 批就是“按接纳的先后、去掉已经结束的”：

# %% tags=["remove-input"]
listing("minisgl/scheduler/decode.py", "DecodeManager")

# %% [markdown]
# 顺序为什么要紧：采样器整批共用一个随机数流（第 6 章），批里的顺序变了，同一个请求抽到的数就变了。TP 时每个 rank 各自拼批、各自采样，顺序不一致，各 rank 就会为同一个请求选出不同的 token。把 decode 批倒过来排，模拟另一个 rank：

# %%
from minisgl.core import Batch

llm.shutdown()  # 一个进程同一时间只能有一个 Engine：下面每次新建一个 LLM，用完关掉


def sample_with_order(reverse: bool) -> list[list[int]]:
    llm = LLM(tiny_qwen3(), max_running_req=4, page_size=4, num_page_override=64, max_seq_len_override=64)
    if reverse:  # 另一个 rank：同样的请求，decode 批倒过来排
        in_order = llm.decode_manager.schedule_next_batch
        llm.decode_manager.schedule_next_batch = lambda: Batch(in_order().reqs[::-1], "decode")
    params = [SamplingParams(temperature=1.0, max_tokens=6, ignore_eos=True),  # 采样
              SamplingParams(max_tokens=6, ignore_eos=True)] * 2  # 贪心
    outs = llm.generate([[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]], params)
    llm.shutdown()
    return [o["token_ids"] for o in outs]


for i, (a, b) in enumerate(zip(sample_with_order(False), sample_with_order(True))):
    kind = "采样" if i % 2 == 0 else "贪心"
    print(f"请求 {i}（{kind}）：顺序不同，结果相同：{a == b}")

# %% [markdown]
# 贪心的请求不受影响，采样的请求从 decode 的第一步起就变了。本书对照的上游提交（20fcd7f）里，`DecodeManager` 用 set 存在跑的请求，批的顺序由对象的内存地址决定，各 rank 不一定相同；上游后来的 PR #113 改为按 uid 排序。
#
# ## 离线接口：LLM.generate
#
# `LLM` 是 `Scheduler` 的子类：构造参数就是 `SchedulerConfig` 的字段。`generate` 先把全部提示分词、检查一遍（有一个不行就报错，指明第几个，一个请求都不排），再全部排进队列，一步步跑到没有请求，按提示的顺序返回：

# %% tags=["remove-input"]
listing("minisgl/llm/llm.py", "LLM.generate")

# %% [markdown]
# ## 运行
#
# 本章的 main，先看源码，再看它在本章的树里真实跑出来的输出：

# %% tags=["remove-input"]
listing("examples/ch07_scheduler.py")

# %%
run("python examples/ch07_scheduler.py")

# %% [markdown]
# 值得注意的地方：
#
# - 两个模型、5 个请求每一行都是“与 HF 一致：True”；页表只有 3 行，5 个请求轮流用它，“结束后”那一行的空闲页和空闲行都回到了总数。
# - 聊天提示生成 7 个 token 就停了，输出 `'The capital of France is Paris.'` 不带 `<|im_end|>`；同一行说 HF 输出的第 8 个 token 正是 EOS。
# - 太长的提示那一行：错误指明是第 1 个提示，60 个 token 加 `max_tokens` 8 超过了 64。

# %% [markdown]
# ## 与上游的差异
#
# 名字和一步的结构与[上游](../glossary.md#upstream) mini-sglang 一致（`Scheduler._schedule_next_batch` / `_prepare_batch` / `_forward` / `_process_last_data`、`PrefillAdder`、`DecodeManager.filter_reqs`、`LLM.generate`），差别有四处：
#
# - 提示太长时我们对这个请求抛 `ValueError`；上游丢掉请求、只打一行警告（客户端一直等），或者悄悄调小 `max_tokens`。`python/minisgl/scheduler/scheduler.py` · `Scheduler._process_one_msg`
# - 我们用 dict 按接纳的先后存在跑的请求；上游在 20fcd7f 用 set，decode 批的顺序随内存地址变，后来的 PR #113 改为按 uid 排序。`python/minisgl/scheduler/decode.py` · `DecodeManager.schedule_next_batch`
# - 我们按页数精确预留（提示 + `max_tokens` − 1 个 token 的页，在跑的请求还要的页）；上游按 token 数估算，每个在跑的请求多留 `page_size − 1` 个 token。`python/minisgl/scheduler/prefill.py` · `PrefillAdder._try_allocate_one`，`decode.py` · `DecodeManager.inflight_tokens`
# - 我们的 `step()` 是同步的一步，请求由调用者直接交进来；上游的 `normal_loop` / `overlap_loop` 还要收发 ZMQ 消息、和下一步重叠（第 11、14 章），长提示超出预算时切块（第 10 章）。`python/minisgl/scheduler/scheduler.py` · `Scheduler.run_forever`
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 一步的四段：`python/minisgl/scheduler/scheduler.py` · `Scheduler._schedule_next_batch`（第 219～225 行）、`python/minisgl/scheduler/scheduler.py` · `Scheduler._prepare_batch`（第 204～217 行）、`python/minisgl/scheduler/scheduler.py` · `Scheduler._forward`（第 227～233 行）、`python/minisgl/scheduler/scheduler.py` · `Scheduler._process_last_data`（第 138～167 行）
# - 不重叠的主循环：`python/minisgl/scheduler/scheduler.py` · `Scheduler.normal_loop`（第 108～118 行）
# - 排队的请求：`python/minisgl/scheduler/utils.py` · `PendingReq`（第 14～27 行）
# - 从队首接纳、按估算长度预留：`python/minisgl/scheduler/prefill.py` · `PrefillManager.schedule_next_batch`（第 126～151 行）、`python/minisgl/scheduler/prefill.py` · `PrefillAdder._try_allocate_one`（第 39～63 行）
# - 在跑的请求和 decode 批：`python/minisgl/scheduler/decode.py` · `DecodeManager`（第 9～39 行）
# - 调度器的配置：`python/minisgl/scheduler/config.py` · `SchedulerConfig`（第 14～41 行）
# - 离线接口：`python/minisgl/llm/llm.py` · `LLM.generate`（第 77～98 行）、`python/minisgl/llm/llm.py` · `LLM.offline_receive_msg`（第 48～69 行）

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch07_scheduler.py`。贪心输出在 SmolLM2 和 tiny Qwen3、各种 `max_running_req` / `page_size` / `max_extend_tokens` 下与 HF 逐 token 相同；停止规则有两条：正好 `max_tokens` 个（从 1 到提示 + `max_tokens` 正好等于 `max_seq_len`，一个不少、一步不多），和在第一个 EOS 处停（与 HF 的输出在第一个 EOS 处截断后相同；`ignore_eos` 时一直生成到 `max_tokens` 个）。先来先服务也有专门的测试：

# %% tags=["remove-input"]
listing("tests/test_ch07_scheduler.py", "test_fcfs_does_not_let_a_small_request_jump_the_queue")

# %% [markdown]
# 其余测试覆盖：坏请求（太长、uid 重复、空提示、token id 越界）当场被拒，队列、行、页都不变，在跑的请求照常结束；取消排队中和在跑的请求；每个提示一个 `SamplingParams`，同一个种子结果可复现；decode 批按接纳的先后排；池子小时请求在队列里等而不会半路没页；token 预算限制一个 prefill 批，但总收下队首。这里只跑接纳、顺序、停止规则和坏请求那几个（全部跑一遍要将近一分钟，`steps.py check 7` 会跑）：

# %%
# NBVAL_IGNORE_OUTPUT
run('python -m pytest -q --color=no tests/test_ch07_scheduler.py '
    '-k "fcfs or worst_case or budget or order or exactly or bad_request"')

# %% [markdown]
# ## 怎么讲清楚
#
# 调度器每一步重新决定算谁：有请求排队、有空行、页够，就先 prefill 队首的请求，否则让所有在跑的请求各 decode 一个 token。接纳按先来先服务，队首放不下就停；请求不会被抢占，所以按最坏情况——提示加上 max_tokens 减 1 个 token——留页，在跑的请求将来要的页先扣掉。结束在 CPU 上判断：正好 max_tokens 个，或者遇到 EOS。同样 8 个请求、页表 4 行，静态批处理 120 步，连续批处理 68 步，输出一个 token 都不变。

# %% [markdown]
# ## 练习
#
# 1. **decode 优先**。把 `_schedule_next_batch` 改成“有在跑的请求就先 decode”，本章的 8 个请求会怎样？新请求什么时候才能进来？
# 2. **挑战：不按最坏情况留页**。按最坏情况留页，池子常常没用满。如果接纳时只留提示的页，页不够时要怎么办，才能保证每个请求最终都能生成完？各有什么代价？
# 3. **队首也看预算**。如果 `PrefillAdder` 对队首第一个请求也要求“提示放得进 token 预算”，一个比 `max_extend_tokens` 还长的提示进来以后会怎样？
#
# ??? success "参考答案"
#
#     1. 第一步 prefill 4 个请求之后，只要还有请求在跑就一直 decode，新请求要等这 4 个全部结束才进来，退化成静态批处理（120 步）。decode 优先要配上“同一步里顺带 prefill 新请求”才不会把队列饿住。
#     2. 页不够时只能抢占：挑一个在跑的请求，把它的页还回去（以后重算它的前缀），或者把它的 K/V 换到别处再换回来。代价是重算或搬运的时间，以及“谁被抢占”这个新的调度问题；本书和上游都不做，换来的是简单。
#     3. 它永远不会被接纳；而先来先服务在队首放不下时就停，排在它后面的请求也一个都进不来，调度器在跑的请求结束后就再也不做事了。所以本章让队首总能进来，第 10 章改为把它切块。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 21   # 把第 21 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 21    # 判题
# python practice/judge.py hint 21    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - 调度器的一步分四段：`_schedule_next_batch` 选批（prefill 优先）、`_prepare_batch` 分配槽位并算好下标、`_forward` 经 token 池读写、`_process_last_data` 在 CPU 上判断结束并释放。
# - `PrefillManager` 先来先服务，队首放不下就停；`PrefillAdder` 要有空行、放得进 token 预算（队首除外）、最坏情况的页放得下。
# - 不抢占，所以按最坏情况留页，在跑的请求将来要的页先扣掉；忘了扣，decode 到一半就没页。
# - 请求在正好 `max_tokens` 个或遇到 EOS 时结束，EOS 不进 `generate` 的输出；太长的提示当场报错。
# - decode 批按接纳的先后排，顺序确定；连续批处理比静态批处理少走四成多的步数，输出不变。
