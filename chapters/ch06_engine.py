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
# # 第 6 章 Engine 与采样器
#
# 到第 5 章为止零件都齐了，可每个例子都要在开头手工把模型、KV 池、页表、注意力后端拼一遍。这一章把“拼”和“算”收进一个类：[Engine](../glossary.md#engine) 构造时装配一次，之后给它一个准备好的批次，它做一次前向、为每个请求采样出下一个 token；分配 KV 页仍是调度器一侧的事。采样由[采样器](../glossary.md#sampler)负责：贪心、温度、top-k、top-p，每个请求各用各的参数。本章的 main 用一个手写的迷你调度器驱动 Engine，4 个长短不一的提示一起生成，与 Hugging Face 逐 token 一致，页全部还回。

# %% tags=["remove-cell"]
from minibook.page import *
setup(6)

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. KV 池的页数为什么要等权重装完才能定？`max_seq_len` 又为什么要看池子有多大？
# 2. 页表比 `max_running_req` 多一行，这一行指向哪里？为什么不能指向 0 号页？
# 3. `forward_batch` 返回时，请求的 `cached_len`、`device_len` 变了吗？为什么这样安排？
# 4. top-p 判断一个 token 去留，看的是“排在它前面的概率之和”还是“累加到它自己为止”？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 页数 = 装完权重后剩余内存 × `memory_ratio` ÷ 每页字节，权重不先装上就不知道剩多少。一个请求再长也放不下比整个池子还多的 token，所以 `max_seq_len` 取配置值与池子容量的较小者。
#     2. 指向一页不分给任何请求的占位页。0 号页属于某个真实请求，占位请求往那里写 K/V，就把别人的缓存写坏了（本章会让它在屏幕上出错）。
#     3. 变了：Engine 在发射前向时就对每个请求调用 `complete_one()`。这样调度器不必等新 token 拷回 CPU，就能按新的长度准备下一步。
#     4. 看“前面之和”：第一名前面是 0，永远留下。看“到自己为止”，第一名的概率一旦 ≥ p 就连它也删掉，整行全 0。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章新建 `minisgl/engine/` 这个包：`config.py` 是配置，`engine.py` 是装配和前向，`sample.py` 是采样器。`examples/` 下是 main、基准测试和 GPU 冒烟检查。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch06_engine.py`：为 SmolLM2 和 tiny Qwen3 各建一个 Engine，把 4 个提示（最多生成 12、6、10、3 个 token）放进同一批生成，与 Hugging Face 的贪心输出逐 token 比较；再演示一批放不下时什么都不改，以及采样的可复现性。`python tools/steps.py check 6` 会搭出本章的树、跑这个 main 和测试；只想跑 main：
#
# ```bash
# python tools/steps.py run 6 -- python examples/ch06_engine.py
# ```
#
# 调度器要到第 7 章才写。main 里的 `MiniScheduler` 是它的替身：[TableManager](../glossary.md#table-manager)（页表的行、[token 池（token pool）](../glossary.md#token-pool)）和 [PageAllocator](../glossary.md#page-allocator)（KV 页）都归它。它的一步分三段：

# %% tags=["remove-input"]
listing("examples/ch06_engine.py", "MiniScheduler.step")

# %% [markdown]
# ![一步生成：调度器的 prepare_batch 整批分配槽位、准备 input_ids、positions、注意力元数据和采样参数；Engine.forward_batch 前向、采样、为每个请求 complete_one，返回 ForwardOutput；调度器把新 token 写进 token 池、等拷贝完成后 append_host、释放已经结束的请求；下方是本章 main 每一步的批大小](../assets/ch06_step.svg)
#
# 拼批、前向、收结果：Engine 只出现在中间那一行。拼批的细节在 `prepare_batch` 里：

# %% tags=["remove-input"]
listing("examples/ch06_engine.py", "MiniScheduler.prepare_batch")

# %% [markdown]
# `alloc_slots(reqs)` 先数出整批要几页，够了才动手：要么每个请求都分到[槽位](../glossary.md#slot)，要么抛 `OutOfPagesError` 而页表和空闲页都不变。`input_ids` 从设备上的 token 池取，而不是从 CPU 上的 `req.input_ids` 拼。
#
# ## Engine 装配一次：分配器不在里面
#
# Engine 持有模型、[KV 池](../glossary.md#kv-pool)、[页表](../glossary.md#page-table)、注意力后端和采样器；它不持有分配器。分配器绑定在页表上，由调度器一侧创建（`PageAllocator(engine.num_pages, page_size, engine.page_table)`）：哪些页空闲、哪个请求占哪几页，是“排”的决定，不是“算”的。

# %% tags=["remove-input"]
listing("minisgl/engine/engine.py", "Engine.__init__")

# %% [markdown]
# 顺序由依赖决定：先登记 TP 和设备，再建模型、装权重，然后才知道剩多少内存给 KV 池，池子定了才知道页表多宽。
#
# ??? note "深入：十步的先后，以及模型为什么先建在 meta 设备上"
#
#     ![左：Engine.__init__ 的十个步骤；右：设备内存里权重和 KV 池各占的一块，KV 池 = 加载完权重后剩余内存 × memory_ratio](../assets/ch06_engine_init.svg)
#
#     - `set_tp_info` 必须最早：第 2 章的层在**构造时**就按 `get_tp_info()` 算本 rank 的形状，加载器按它切权重，KV 池按它定本地 KV 头数。
#     - CUDA 设备上 `torch.cuda.set_device`：之后不写设备号的调用（新建事件、取当前流）都落在这块卡上。不调用它，rank 1 的进程会在 cuda:0 的流上记事件。
#     - `with torch.device("meta")` 之内建的张量只有形状和 dtype，没有存储，整棵模型树“建好”几乎不花时间；`load_weight` 流式读出本 rank 切好的张量，`load_state_dict` 把它们整个替换上去。内存里只有一份权重，不会先随机初始化一份再覆盖。
#     - 页表的最后一行是占位行，指向占位页（下文）；注意力后端要读写的 KV 池和页表此时都有了；采样器最后建，它只依赖设备和词表大小。
#
# 在 tiny Qwen3 上建一个小 Engine，看看装配出了什么：

# %%
import sys

import torch

sys.path.insert(0, "examples")  # 本章 main 里的 MiniScheduler
from ch06_engine import MiniScheduler
from minibook.hf import hf_greedy
from minibook.models import qwen3_06b_config, smollm2, tiny_qwen3
from minisgl.core import Batch, Req, SamplingParams, get_global_ctx
from minisgl.engine import Engine, EngineConfig

engine_config = EngineConfig(model_path=tiny_qwen3(), max_running_req=4, page_size=4,
                             num_page_override=32, max_seq_len_override=64)
engine = Engine(engine_config)
c = engine.model_config
print(f"模型：{c.architecture}，{c.num_layers} 层，{c.num_qo_heads} 个 q 头，"
      f"{c.num_kv_heads} 个 KV 头")
print(f"KV 池：{tuple(engine.kv_cache.kv_buffer.shape)} = [K/V, 层, 槽位, KV 头, head_dim]")
print(f"可分配的页：{engine.num_pages}，占位页：{engine.dummy_page} 号")
print(f"页表：{tuple(engine.page_table.shape)}，max_seq_len = {engine.max_seq_len}")
print(f"注意力后端：{type(engine.attn_backend).__name__}，"
      f"采样器的种子：{engine.sampler.generator.initial_seed()}")
print("Engine 有分配器吗：", hasattr(engine, "page_allocator"))
assert get_global_ctx().attn_backend is engine.attn_backend  # 层在前向时从全局上下文拿后端
assert engine.kv_cache.num_slots == (32 + 1) * 4  # 32 页给请求，1 页占位
assert engine.page_table.shape == (4 + 1, 64)

# %% [markdown]
# KV 池有 33 页：0–31 号给请求，32 号是[占位页](../glossary.md#dummy-page)。页表 5 行，4 行给请求，最后一行是占位行。
#
# ## 页数只看内存，max_seq_len 按池子封顶
#
# 一页 KV 的字节数只取决于模型结构和 dtype；页数 = 剩余内存 × `memory_ratio` ÷ 每页字节，测试和演示直接给 `num_page_override`：

# %% tags=["remove-input"]
listing("minisgl/engine/engine.py", "Engine._decide_num_pages")

# %% [markdown]
# 内存是贵的资源，页表只是一张 int32 的表：让便宜的跟着贵的走。一个请求不可能比整个池子还长，所以页表的宽度 `max_seq_len` 取配置值和池子容量的较小者；池子的大小则不看页表。给一个只有 5 页的池子：

# %%
engine.shutdown()  # 一个进程同一时间只能有一个 Engine（它们共用全局上下文）：先关掉前面那个
small = Engine(EngineConfig(model_path=tiny_qwen3(), max_running_req=4, page_size=4,
                            num_page_override=5, max_seq_len_override=64))
print(f"配置的 max_seq_len = 64，池子 5 页 × 4 = 20 个 token → max_seq_len = {small.max_seq_len}，"
      f"页表 {tuple(small.page_table.shape)}")
try:
    MiniScheduler(small).add(list(range(15)), SamplingParams(max_tokens=6), uid=0)
except ValueError as e:
    print("进门就拒绝：", e)
assert small.max_seq_len == 20 and small.page_table.shape == (5, 20)
small.shutdown()
engine = Engine(engine_config)  # 后面接着用原来那个配置

# %% [markdown]
# 反过来的做法是按“行数 × 每行最多几页”给池子封顶：它把“每一页都属于某个正在运行的请求”写进了池子的大小。上游同样让 `max_seq_len` 跟着池子走；等页也被前缀缓存持有时（第 9 章），池子的大小不用改。
#
# ??? note "深入：每个 token 的 KV 有多大"
#
#     每个 token 的 KV 是“K 和 V 两份 × 层数 × 本地 KV 头数 × head_dim × 每个数的字节数”。下面这张表只用 `config.json` 算（Qwen3-0.6B 的配置是仓库里的事实文件，不需要权重），假设装完权重后有 4 GiB 预算。SmolLM2 只有 3 个 KV 头、head_dim 64，bf16 下每 token 22.5 KiB；Qwen3-0.6B 是它的 5 倍。同样 4 GiB，Qwen3-0.6B 的 bf16 只放得下约 3.7 万个 token——decode 阶段能同时跑多少请求，就是这样被 KV 池限制的。

# %%
from IPython.display import Markdown
from minisgl.models import ModelConfig


def kv_bytes_per_token(cfg: ModelConfig, dtype: torch.dtype) -> int:
    """K 和 V 两份 × 层数 × KV 头数 × head_dim × 每个数的字节数（TP=1）。"""
    itemsize = torch.empty(0, dtype=dtype).element_size()
    return 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * itemsize


rows = ["| 模型 | dtype | 每 token 的 KV | 4 GiB 放得下的 token |", "| --- | --- | ---: | ---: |"]
for name, cfg in {"SmolLM2-135M": ModelConfig.from_json(smollm2()),
                  "Qwen3-0.6B": ModelConfig.from_json(qwen3_06b_config())}.items():
    for dtype in (torch.float32, torch.bfloat16):
        per_token = kv_bytes_per_token(cfg, dtype)
        rows.append(f"| {name} | {str(dtype).removeprefix('torch.')} | {per_token / 1024:.1f} KiB "
                    f"| {4 * 2**30 // per_token:,} |")
# 同一个公式与 Engine 的实现对得上（tiny Qwen3，一页 4 个 token）
assert engine.kv_bytes_per_page() == kv_bytes_per_token(engine.model_config, torch.float32) * 4
Markdown("\n".join(rows))

# %% [markdown]
# ## 占位行指向一页没人用的占位页
#
# 页表最后一行不发给请求，留给补齐批大小用的占位请求（CUDA 图按固定批大小重放时要用，计划在第 18 章讲）。占位请求和真实请求一起前向，也会把它的 K/V 写进“自己的”槽位：这一行指向哪里，决定了这次写入会不会伤到别人。下面手工补一个占位请求，让它和一个真实请求一起 decode：

# %%
PAD_ROW = engine.config.max_running_req  # 页表最后一行


def generate_with_padding(prompt: list[int], n: int) -> list[int]:
    """每步 decode 都补一个占位请求，像 CUDA 图按固定批大小重放那样。"""
    sched = MiniScheduler(engine)
    req = sched.add(prompt, SamplingParams(max_tokens=n), uid=0)
    out = sched.step([req], "prefill")
    while req.can_decode:
        pad = Req(input_ids=torch.tensor([0], dtype=torch.int32), table_idx=PAD_ROW, cached_len=0,
                  output_len=1, uid=-1, sampling_params=SamplingParams(), cache_handle=None)
        batch = Batch([req], "decode")
        batch.padded_reqs = [req, pad]
        padding_slot = engine.page_table[PAD_ROW, :1]  # 占位请求写 K/V 的地方
        batch.out_loc = torch.cat([sched.allocator.alloc_slots([req]), padding_slot])
        pool = sched.table.token_pool
        batch.input_ids = torch.cat([pool[req.table_idx, req.cached_len:req.device_len],
                                     pool[PAD_ROW, :1]]).long()
        batch.positions = torch.tensor([req.cached_len, 0])
        engine.attn_backend.prepare_metadata(batch)
        fwd = engine.forward_batch(batch, engine.sampler.prepare(batch))
        pool[req.table_idx, req.device_len - 1] = fwd.next_tokens[0]
        req.append_host(int(fwd.next_tokens_cpu[0]))
        out.append(int(fwd.next_tokens_cpu[0]))
    sched.allocator.free_slots(req.table_idx, req.cached_len)
    return out


prompt = [504, 3458, 282, 4649, 314]
reference = hf_greedy(tiny_qwen3(), prompt, 6)
print(f"占位行整行是 {engine.page_table[PAD_ROW, 0].item()} 号槽位（{engine.dummy_page} 号页）")
good = generate_with_padding(prompt, 6)
print("指向占位页：", good, " 与 HF 一致：", good == reference)

engine.page_table[PAD_ROW] = 0  # 错误的版本：占位行指向 0 号槽位，它属于真实请求的第 0 个 token
bad = generate_with_padding(prompt, 6)
engine.page_table[PAD_ROW] = engine.dummy_page * engine.config.page_size  # 改回来
print("指向 0 号槽位：", bad, " 与 HF 一致：", bad == reference)
assert good == reference and bad != reference

# %% [markdown]
# 指向 0 号槽位时，占位请求每一步都把自己的 K/V 写进真实请求第 0 个 token 的位置，真实请求从下一个 token 起就读到了别人的 K/V，输出变了，程序却不报错。占位页不在分配器的页数里（`engine.num_pages` 不含它），永远不会发给请求，写坏了也没人读。
#
# ## forward_batch：只算，不排，发射时记账
#
# Engine 对外只有一个干活的方法：

# %% tags=["remove-input"]
listing("minisgl/engine/engine.py", "Engine.forward_batch")

# %% [markdown]
# 它在 `ctx.forward_batch(batch)` 里前向，去掉补齐的占位行，采样；然后对每个请求调用 `complete_one()`：这一步的 token 进了 KV 池（`cached_len = device_len`），新 token 占住下一个位置（`device_len += 1`）。新 token 此刻可能还在设备上，调度器却已经知道下一步每个请求算哪个位置：

# %%
sched = MiniScheduler(engine)
req = sched.add(prompt, SamplingParams(max_tokens=3), uid=0)
batch = sched.prepare_batch([req], "prefill")
out = engine.forward_batch(batch, engine.sampler.prepare(batch))
print("前向之后：", req, "，CPU 上的 token 数", len(req.input_ids))
sched.table.token_pool[req.table_idx, req.device_len - 1] = out.next_tokens[0]
nxt = sched.prepare_batch([req], "decode")  # 还没读新 token，就能准备下一步
print("下一步：positions", nxt.positions.tolist(), " out_loc", nxt.out_loc.tolist())
assert (req.cached_len, req.device_len, len(req.input_ids)) == (5, 6, 5)

# %% [markdown]
# 前向之后 `cached_len=5, device_len=6`，CPU 上的 `input_ids` 还是 5 个：`append_host` 要等 token 真正拷回来。下一步的位置 5、槽位 5 已经定下，输入从 token 池里取。要是把 `complete_one()` 留到读回 token 之后，提前准备下一步时记账还停在上一步：

# %%
late = sched.add([11, 12, 13], SamplingParams(max_tokens=3), uid=1)
b = sched.prepare_batch([late], "prefill")
with engine.ctx.forward_batch(b), torch.inference_mode():
    engine.model.forward()  # 只前向，不记账：模拟“等 token 拷回再 complete_one”
try:
    sched.prepare_batch([late], "decode")
except AssertionError as e:
    print("提前准备下一步：AssertionError：", e)

# %% [markdown]
# 分配器发现这一行已经占了页，可 `cached_len` 还是 0，拒绝再分配；没有这条断言，同一段提示会被当成新 token 再算一遍。记账放在发射时，调度器就能像上一格那样，在读回 token 之前准备好下一步；上游也是这样放的，重叠调度（第 11 章）靠的就是这一点。

# %%
for r in (req, late):  # 收拾干净：还页、还行
    sched.allocator.free_slots(r.table_idx, r.device_len)  # 两个请求都分到了 [0, device_len)
    sched.table.free(r.table_idx)
assert sched.allocator.num_free_pages == engine.num_pages

# %% [markdown]
# ### ForwardOutput：异步拷回，事件记在 Engine 的流上

# %% tags=["remove-input"]
listing("minisgl/engine/engine.py", "ForwardOutput")

# %% [markdown]
# 在 GPU 上 `next_tokens.tolist()` 会让 CPU 停下来，等这条流上排在前面的活（整个前向和采样）全部干完。`forward_batch` 改为发射一次 `non_blocking=True` 的拷贝（目标在[锁页内存](../glossary.md#pinned-memory)里），紧跟着在 Engine 的流上记录一个 CUDA 事件 `copy_done`；调度器真要读 token 时才 `copy_done.synchronize()`。在 CPU 上没有异步，`next_tokens_cpu` 就是 `next_tokens`，`copy_done` 为 `None`。
#
# ??? note "深入：没等事件就读，以及 gpu_smoke 查什么"
#
#     没等事件就读 CPU 副本是一个安静的错误：读到的是拷贝完成之前那块内存里的旧值，程序不报错，只是生成乱码。本章的测试 `test_generate_waits_for_the_copy_before_reading_tokens` 在 CPU 上模拟一个“迟到”的拷贝：CPU 副本先填满 −1，只有 `synchronize()` 时才写进真 token。
#
#     主机到设备的方向也一样：`torch.tensor(values, device="cuda")` 从普通内存拷贝，CPU 要等它完成。`Sampler.prepare`、分配器、注意力元数据在 CUDA 上都先把数据放进锁页内存，再 `non_blocking=True` 地拷过去；CPU 上什么都不变。采样本身也避开了一个隐藏的同步：`torch.multinomial` 先把“分布是否合法”读回 CPU 检查，采样器改用它内部的同一个算法（`argmax(p / q)`，`q` 服从指数分布），同样的随机数、同样的结果，什么都不读回。
#
#     这些路径在 CPU 上测不到。`examples/gpu_smoke.py` 在有 CUDA 时几秒钟查一遍：`set_device` 和流、用 `torch.cuda.set_sync_debug_mode("warn")` 数出一步里每个部件的同步次数（应当都是 0）、CPU 副本在锁页内存里、批量生成与 HF 一致。它在一块 H200 上跑过（2026-12-04，第 16 章的树、tiny Qwen3、torch 2.11）：第一次，`Engine.forward_batch` 数出 2 次同步，逐行找下去是第 2 章的 RoPE 表——它在 CPU 上算好，原先第一次前向时才 `.to(q.device)`，从普通内存出发的拷贝就是同步。改成 Engine 加载完权重立刻 `rope_tables_to(device)` 之后，全部检查通过，每个部件 0 次。没有 CUDA 时它说明原因并以 0 退出：

# %%
# NBVAL_IGNORE_OUTPUT
run("python examples/gpu_smoke.py")  # 有 CUDA 的机器上这里是完整的检查，输出不同

# %% [markdown]
# ## 采样器：排一次序，top-k 和 top-p 都在上面做
#
# ![采样器降序排一次：先把名次 ≥ k 的 logits 置为 −inf，再对剩下的重新 softmax，算出每个 token 前面的概率之和，≥ p 的置 0，最后按比例抽一个名次并换回 token id](../assets/ch06_sampler.svg)
#
# `prepare` 把一批的[采样参数](../glossary.md#sampling-params)整理成几列张量（整批贪心时什么都不建），`sample` 对整批一次算完，贪心以外的行交给 `_sample`：

# %% tags=["remove-input"]
listing("minisgl/engine/sample.py", "Sampler._sample")

# %% [markdown]
# 温度做在排序之前（除以正数不改变名次）；排一次序，top-k 是“名次 ≥ k 置 −inf”，top-p 是“前面之和 ≥ p 置 0”；贪心行最后用没除温度的 logits 的 argmax 覆盖。用图里那行分布检查：8 个 token，`top_k = 5, top_p = 0.75`，再把 top-k 去掉、只留 `top_p = 0.75` 对照。每种各抽 2 万次：

# %%
from minisgl.engine import BatchSamplingArgs, Sampler

probs_by_id = torch.tensor([0.10, 0.04, 0.20, 0.08, 0.02, 0.35, 0.06, 0.15])
logits = probs_by_id.log()  # softmax(log p) = p
N = 20000


def same_args(n, temperature=1.0, top_k=8, top_p=1.0):
    """n 行一样的采样参数（直接构造 BatchSamplingArgs，省掉 n 个请求）。"""
    return BatchSamplingArgs(all_greedy=False, greedy=torch.zeros(n, dtype=torch.bool),
                             temperatures=torch.full((n,), temperature),
                             top_k=torch.full((n,), top_k, dtype=torch.int64),
                             top_p=torch.full((n,), top_p))


sampler = Sampler(torch.device("cpu"), vocab_size=8, seed=0)
kept = {}
for top_k in (5, 8):
    drawn = sampler.sample(logits.expand(N, 8), same_args(N, top_k=top_k, top_p=0.75))
    freq = torch.bincount(drawn.long(), minlength=8) / N
    kept[top_k] = sorted(drawn.unique().tolist(), key=lambda t: -probs_by_id[t])
    shares = [round(freq[t].item(), 3) for t in kept[top_k]]
    print(f"top_k={top_k}, top_p=0.75：留下 {kept[top_k]}，频率 {shares}")
assert kept[5] == [5, 2, 7] and kept[8] == [5, 2, 7, 0]

# %% [markdown]
# 同一个分布、同一个 p，一个留 3 个，一个留 4 个，差别在 top-k 之后的重新归一化。只做 top-p 时，前三名之和是 0.35 + 0.20 + 0.15 = 0.70 < 0.75，第四名（token 0）前面之和还不到 p，留下。先做 top-k = 5 时，剩下 5 个的和只有 0.88，重新 softmax 后每个都放大约 1.14 倍，前三名之和变成 0.80 ≥ 0.75，第四名就被删了。留下的几个再按比例抽：0.35 : 0.20 : 0.15 折成 0.50、0.29、0.21，输出里实测的 0.503、0.284、0.213 与之相符。
#
# ### 前面之和，而不是到自己为止
#
# 常见的错误写法是“累加到自己为止 ≥ p 就丢掉”：

# %%
sorted_p, _ = probs_by_id.sort(descending=True)
cum = sorted_p.cumsum(0)
before = cum - sorted_p
for p in (0.75, 0.3):
    right, wrong = before < p, cum < p
    print(f"top_p={p}：正确写法留 {int(right.sum())} 个（和 {sorted_p[right].sum():.2f}），"
          f"错误写法留 {int(wrong.sum())} 个（和 {sorted_p[wrong].sum():.2f}）")
try:
    torch.multinomial(torch.zeros(1, 8), 1)  # 错误写法在 p=0.3 时得到全 0 的一行
except RuntimeError as e:
    print("全被删光时抽样：", e)
assert (before < 0.3).sum() == 1 and (cum < 0.3).sum() == 0

# %% [markdown]
# p = 0.75 时错误写法少留一个，留下的和只有 0.70，不到 p；p = 0.3 时第一名自己就有 0.35，错误写法把它也删了，整行全 0：交给 `torch.multinomial` 直接报错，交给本章采样器的 `argmax(p / q)` 却不报错，全 0 的一行 argmax 落在第一名上，错误被悄悄盖住。正确写法里第一名前面之和是 0，而 `SamplingParams` 保证 p > 0，第一名永远留下。
#
# ### 温度：实测频率对理论值
#
# 同一行 logits 在三个温度下各抽 2 万次。表中每格左边是**实测**频率，右边是**理论值** `softmax(logits / T)`，按概率从大到小列前四名：

# %%
top4 = probs_by_id.argsort(descending=True)[:4].tolist()
print(f"{'T':<5}" + "".join(f"{'token ' + str(t) + '（实测 / 理论）':>20}" for t in top4))
for T in (0.5, 1.0, 2.0):
    drawn = sampler.sample(logits.expand(N, 8), same_args(N, temperature=T))
    freq = torch.bincount(drawn.long(), minlength=8) / N
    theory = (logits / T).softmax(-1)
    print(f"{T:<5}" + "".join(f"{freq[t]:>12.3f} / {theory[t]:.3f}" for t in top4))
    assert (freq - theory).abs().max() < 0.02

# %% [markdown]
# 按理论值，T = 0.5 时第一名从 0.35 涨到 0.59，T = 2 时降到 0.23，分布被拉平；实测频率与理论值相差都不到 0.02（上一格的断言）。T → 0 的极限是 argmax，但不能拿 0 去除，也不能拿 1e-40 这样的数去除（logits / T 溢出成 inf，softmax 成 NaN），所以第 1 章把温度低于 1e-5 的请求定义成贪心（和 vLLM 一样），走 argmax 分支。
#
# ### 种子：采样器自己拿着一个 Generator
#
# 随机数只来自采样器构造时建的 `torch.Generator(device).manual_seed(seed)`，别处动了全局随机数也不受影响：

# %%
def sample_12(seed, disturb=False, neighbour=False):
    smp, n = Sampler(torch.device("cpu"), 8, seed=seed), 2 if neighbour else 1
    out = []
    for _ in range(12):
        if disturb:  # 别处的代码动了全局随机数
            torch.manual_seed(123)
            torch.rand(1000)
        out.append(smp.sample(logits.expand(n, 8), same_args(n))[-1].item())
    return out


a, b, c, d = sample_12(0), sample_12(0, disturb=True), sample_12(1), sample_12(0, neighbour=True)
print("种子 0：                  ", a)
print("种子 0，全局随机数被动过：", b)
print("种子 1：                  ", c)
print("种子 0，同批前面多一个请求：", d)
assert a == b and a != c and d != a

# %% [markdown]
# 前两行相同。最后一行是共享随机数流的边界：同一个请求只要同批多了一个邻居，抽到的就变了，所以它的“可复现”指“同样的种子、同样的请求序列、同样的拼批 → 同样的结果”。OpenAI 客户端要的是另一种：请求自己带 `seed`，和谁拼批都一样，下面的框讲它。TP 时每个 rank 用同一个种子、以同样的顺序采样，才能抽出同一个 token。
#
# ??? note "深入：请求自己的 seed、presence/frequency 惩罚与 logprobs"
#
#     这三样是 OpenAI 接口的参数（第 15 章），算在采样器里，都不必等新 token 回到 CPU：
#
#     - **seed**：带 seed 的行不用共享的随机数，而用 `step_seed(seed, 已生成几个)` 新建一个 Generator 抽指数噪声。种子只由这两个数决定，所以和邻居、拼批、重叠调度（第 11 章）都无关；`n` 个回答用 seed + i，splitmix64 的混合让它们的各步种子不会错位重合。
#     - **惩罚**：logit 减去 `presence × [出现过] + frequency × 出现次数`，只数生成的 token。计数是设备上一张 `[页表行数, 词表]` 的表，按请求的行存：采样之后就地累加，第一个 token 之前清零（行会交给下一个请求）。重叠调度时第 N 步的 token 还没回到 CPU，第 N+1 步就发出了，从 CPU 上的 token 重建计数会少数一个。
#     - **logprobs**：原始 logits（惩罚和温度之前，和 OpenAI、vLLM 一样）的 `log_softmax`，取采样出的 token 和前 k 名。结果写进 `prepare` 预先占好的张量，`ForwardOutput.logprobs` 把它和 token 一起拷回 CPU。
#
#     三样都在 `sample` 里接在 `_sample` 前后：惩罚改 logits，采样之后累加计数、算 log 概率。

# %% tags=["remove-input"]
listing("minisgl/engine/sample.py", "Sampler.sample")

# %% [markdown]
# 在上面那行 8 个 token 的分布上各看一眼：带 seed 的请求多了邻居也不变；贪心加惩罚，不再每步都是 5；log 概率就是 log p；1e-40 的温度直接除只会得到 NaN：

# %%
from minisgl.core import Batch, Req, SamplingParams
from minisgl.engine import logprobs_per_req


def decode_steps(params, sampler_seed, steps=8):
    """像 decode 一样跑几步（每步请求前进一个 token），返回最后一个请求的 token 和最后一步的参数。"""
    reqs = [Req(input_ids=torch.tensor([1, 2], dtype=torch.int32), table_idx=i, cached_len=0,
                output_len=16, uid=i, sampling_params=p, cache_handle=None)
            for i, p in enumerate(params)]
    smp, batch, out = Sampler(torch.device("cpu"), 8, seed=sampler_seed), Batch(reqs, "decode"), []
    for _ in range(steps):
        args = smp.prepare(batch)
        out.append(smp.sample(logits.expand(len(reqs), 8), args)[-1].item())
        for r in reqs:
            r.complete_one()
    return out, args, reqs


mine = SamplingParams(temperature=1.0, seed=42)
alone, _, _ = decode_steps([mine], sampler_seed=0)
crowded, _, _ = decode_steps([SamplingParams(temperature=1.0), mine], sampler_seed=7)
print("seed=42，单独一批：      ", alone)
print("seed=42，前面多一个邻居：", crowded)
penalized, _, _ = decode_steps([SamplingParams(presence_penalty=1.0, frequency_penalty=0.5)], 0)
print("贪心 + 惩罚：            ", penalized, "（不惩罚时每步都是 5）")
asked = SamplingParams(temperature=1.0, seed=1, logprobs=True, top_logprobs=3)
tokens, args, reqs = decode_steps([asked], 0, steps=1)
lp = logprobs_per_req(args.logprobs, reqs)[0]
print(f"logprobs：token {tokens[0]} 的 {lp.logprob:.3f} = log {probs_by_id[tokens[0]]:.2f}；"
      f"前 3 名 {lp.top_ids}")
print("temperature=1e-40：", (logits / 1e-40).softmax(-1)[:3].tolist(), "→ 按贪心处理：",
      SamplingParams(temperature=1e-40).is_greedy)
assert alone == crowded and penalized[0] == 5 and len(set(penalized)) > 2
assert abs(lp.logprob - probs_by_id[tokens[0]].log().item()) < 1e-5 and lp.top_ids == [5, 2, 7]

# %%
engine.shutdown()

# %% [markdown]
# ## 运行
#
# 本章的 main 在本章的树里真实跑出来的输出：

# %%
run("python examples/ch06_engine.py")

# %% [markdown]
# 值得注意的地方：
#
# - 每一步的批大小 `[4, 4, 4, 3, 3, 3, 2, 2, 2, 2, 1, 1]`：3 个 token 的请求在第 3 步后离开，之后依次是 6 个、10 个、12 个的。
# - 两个模型、4 个提示全部“与 HF 一致：True”；结束后空闲页 64 / 64。
# - 两个 8 token 的提示要 4 页，3 页的池子放不下：报错之后空闲页仍是 3 / 3，页表和请求的记账都没变。
# - 种子相同结果相同，种子不同采样的请求结果不同，同批的贪心请求始终与 HF 一致。
#
# ### decode 速度与 HF generate 相当，拼批才是吞吐的来源
#
# `examples/ch06_benchmark.py` 是基准测试，不是测试：两边用同样 24 个 token 的提示、贪心生成 32 个 token，只计 prefill 之后的 31 步 decode。计时口径：

# %% tags=["remove-input"]
listing("examples/ch06_benchmark.py", "engine_decode_seconds")

# %% [markdown]
# !!! warning "数字取决于机器"
#     下面的表和剖析是执行这一页时真实跑出来的，测试不会重跑它们（太慢，而且每次都不一样）。只有同一次运行里的“比值”有参考意义。在你的机器上：
#
#     ```bash
#     python tools/steps.py run 6 -- python examples/ch06_benchmark.py
#     ```

# %% tags=["remove-input"]
# NBVAL_SKIP
import contextlib
import io
import re

buffer = io.StringIO()
with contextlib.redirect_stdout(buffer):
    run("python examples/ch06_benchmark.py")
first_line, _, table = buffer.getvalue().partition("\n")
Markdown(f"{first_line}\n\n{table}")

# %% [markdown]
# 批大小 1 时，decode 一个 token 要把全部权重（float32 约 540 MB）从内存读一遍，两边调用的是同一个矩阵乘，速度应当接近。批大小 16 时，16 个 token 共用一次权重读取，矩阵-向量乘变成矩阵乘，吞吐随之上去——这就是要把请求拼成批的理由。
#
# #### 批大小 16：两边的时间都花在同一个矩阵乘上
#
# 比值离 1 远不远，要看两边的时间是不是都花在同样的地方。`ch06_benchmark.py --profile` 用 `torch.profiler` 只剖析 decode 那一段（prefill 之后才开始记），列出自身 CPU 时间最多的几个 aten 算子占这段墙钟时间的比例。下面是 `--profile --batch-sizes 16 --new-tokens 9` 的输出：

# %% tags=["remove-input"]
listing("examples/ch06_benchmark.py", "decode_profile")

# %% tags=["remove-input"]
# NBVAL_SKIP
buffer = io.StringIO()
with contextlib.redirect_stdout(buffer):
    run("python examples/ch06_benchmark.py --profile --batch-sizes 16 --new-tokens 9")
print(buffer.getvalue(), end="")
firsts = re.findall(r"decode：\n\s+(\S+)", buffer.getvalue())
assert firsts == ["aten::mm", "aten::mm"]  # 两边排第一的都是矩阵乘

# %% [markdown]
# 两边排第一的都是 `aten::mm`，而且远远领先：decode 的时间主要花在同一个矩阵乘上，所以在安静的机器上比值应当接近 1。两边是先后测的，机器上有别的负载时比值会随负载漂移，多跑几次看它的范围；剩下那部分时间里两边各有各的额外开销。
#
# ??? note "深入：剩下那部分，两边各多做了什么"
#
#     我们这边：每层经页表把整段 K/V 收集出来（`index_select`，K、V 各一次；GQA 交给 SDPA 的 `enable_gqa`，不复制成 q 头数），`store_kv` 按槽位写入；RoPE 每层按 positions 取一次 cos/sin。HF 那边：KV 缓存是连续张量，每步每层 `torch.cat` 追加一格，要把整段缓存拷一遍；`generate` 在 `[16, 49152]` 的 logits 上跑 logits processor（`min_new_tokens` 屏蔽 EOS 的 `where`）。迷你调度器里逐请求的 Python 循环每步不到 1 毫秒。
#
#     所以在 CPU、float32、这么小的模型上，Engine 的价值不在单步更快：请求可以陆续结束、空出的位置能塞进新请求，而 HF 的 `generate` 一批里要么等长、要么左填充，所有序列陪最长的那条跑到底。到了 GPU 上，小批量时每步几百个小内核的发射开销和 CPU 侧的调度时间会占主导，那是重叠调度、按页读 K/V 的注意力内核和 CUDA 图要解决的。

# %% [markdown]
# ## 与上游的差异
#
# 名字和接口与[上游](../glossary.md#upstream) mini-sglang 一致（`EngineConfig`、`Engine.forward_batch`、`ForwardOutput`、`Sampler.prepare` / `sample`），差别有四处：
#
# - 流：CUDA 上和上游一样，构造时新建一条自己的流并设为当前流（旧式的默认流会和 NCCL、别的流隐式同步，CUDA 图的捕获也要在自己的流上进行）；差别只在 CPU 上没有流，我们什么也不做，上游不支持 CPU。`python/minisgl/engine/engine.py` · `Engine.__init__`
# - 我们的 KV 预算是装完权重后剩余内存 × 0.3；上游在装权重前量空闲显存（TP 时取各 rank 的最小值），预算 = 0.9 × 空闲 − 权重，因为整块 GPU 归它一个进程，CPU 内存却是整机共享的。`python/minisgl/engine/engine.py` · `Engine._determine_num_pages`
# - 我们用纯 torch 排一次序再抽样，贪心行用精确的 argmax；上游调 FlashInfer 不排序的采样内核，温度夹到不小于 1e-6 来近似贪心，因为对 15 万的词表排序在 GPU 上是一个不小的内核。`python/minisgl/engine/sample.py` · `Sampler.sample`
# - 我们的 `ForwardOutput` 是 dataclass，CPU 上副本就是原张量、事件为 `None`；上游是 `NamedTuple`，事件总是 CUDA 事件，因为它只在 GPU 上跑。`python/minisgl/engine/engine.py` · `ForwardOutput`
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 引擎的配置：`python/minisgl/engine/config.py` · `EngineConfig`（第 15～55 行）
# - 构造：建流、装权重、建 KV 池、页表和采样器：`python/minisgl/engine/engine.py` · `Engine.__init__`（第 30～110 行）
# - KV 预算，TP 时取各 rank 空闲显存的最小值：`python/minisgl/engine/engine.py` · `Engine._determine_num_pages`（第 148～168 行）、`python/minisgl/engine/engine.py` · `Engine._sync_get_memory`（第 170～189 行）
# - 一步前向、记账和拷回：`python/minisgl/engine/engine.py` · `Engine.forward_batch`（第 191～206 行）、`python/minisgl/engine/engine.py` · `ForwardOutput`（第 23～26 行）
# - 把一批的采样参数打包成张量：`python/minisgl/engine/sample.py` · `BatchSamplingArgs`（第 13～17 行）、`python/minisgl/engine/sample.py` · `Sampler.prepare`（第 53～68 行）
# - 抽样，整批贪心时取 argmax，否则调 FlashInfer：`python/minisgl/engine/sample.py` · `Sampler.sample`（第 70～75 行）、`python/minisgl/engine/sample.py` · `sample_impl`（第 24～45 行）

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch06_engine.py`。采样器一组不加载模型，用随机 logits 检查每条规则（top-p 的参照是“逐个加入，直到累计概率达到 p”）；Engine 一组在 SmolLM2 和 tiny Qwen3、页大小 1 和 4 下批量生成，逐 token 对照 HF。一批放不下时什么都不改，也有专门的测试：

# %% tags=["remove-input"]
listing("tests/test_ch06_engine.py", "test_a_batch_that_does_not_fit_changes_nothing")

# %% [markdown]
# 其余测试覆盖：`forward_batch` 在发射时记账；`copy_done` 记在 Engine 的流上（用一个假的事件和流检查）；池子按预算定页数、不被页表封顶，`max_seq_len` 按池子封顶；占位行指向没人能分到的占位页，补齐的占位请求只写占位页；读 CPU 副本之前一定等事件；`gpu_smoke` 没有 CUDA 时干净地跳过，`--cpu` 时走通自己的逻辑；`EngineConfig` 拒绝坏值。在本章的树里跑全部：

# %%
run("python -m pytest -q --color=no tests/test_ch06_engine.py")

# %% [markdown]
# ## 怎么讲清楚
#
# Engine 只管算。构造时按依赖装配一次：先登记 TP 和设备，在 meta 设备上建模型、流式换上真权重，再用剩余内存定 KV 池的页数，页表宽度按池子封顶，最后一行指向一页没人用的占位页。运行时只有 `forward_batch`：前向、采样、在发射时对每个请求 `complete_one()`，返回设备上的 token、异步拷回的 CPU 副本和一个事件，调度器不必等 token 回来就能准备下一步。分配页、拼批、还页都在调度器一侧，一批放不下就整批拒绝、什么都不改。本章 4 个长短不一的请求一起生成，与 HF 逐 token 一致。

# %% [markdown]
# ## 练习
#
# 1. **挑战：向量化的按请求种子**。本章带 seed 的行各自新建一个 Generator、逐行抽噪声（见上面的框），批里带 seed 的请求一多，这个 Python 循环就成了开销。设计一种做法，使“同一个请求、同一个种子、同一个位置”不管和谁拼批都抽出同一个 token，并且对整批一次算完。
# 2. **占位行指向 0 号页**。本章演示了占位行指向 0 号槽位时输出会变。如果这一批里碰巧没有请求用到 0 号页，输出还会错吗？为什么仍然不能这样做？
# 3. **把同步找出来**。在 GPU 上，如果 `Sampler.prepare` 改回 `torch.tensor(values, device="cuda")`，CPU 会在哪里等、等什么？怎样用 `examples/gpu_smoke.py` 看出来？
#
# ??? success "参考答案"
#
#     1. 不用有状态的 Generator，而让每行的随机数由 `(请求的种子, 位置)` 算出来，例如喂进一个整数哈希或 Philox 这类计数器式发生器，映射到 (0, 1)。有了每行的 u，在排好序、处理过 top-k/top-p 的概率上做 `cumsum`，用 `torch.searchsorted` 对整批一次找出第一个 `cumsum ≥ u × 总和` 的名次，再用 `order` 换回 token id。每行只依赖自己的种子和位置，与邻居无关。
#     2. 这一批不会错，但 0 号页迟早会分给某个请求，到那时占位请求写进去的 K/V 就覆盖了它的缓存，错误取决于分配顺序，很难复现。占位页不在分配器的页数里，永远不会分给请求，写坏了也没人读。
#     3. 每一列参数都是一次从普通内存出发的同步拷贝：CPU 要等这条流上排在前面的全部工作（上一步的前向）和这次拷贝都做完才往下走。`gpu_smoke` 用 `set_sync_debug_mode("warn")` 数每个部件的同步次数，`Sampler.prepare` 那一行会从 0 次变成每个非全贪心的批 4 次（4 列参数），检查失败。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 18   # 把第 18 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 18    # 判题
# python practice/judge.py hint 18    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - Engine 装配模型、KV 池、页表、注意力后端和采样器；分配器归调度器一侧，绑定在 Engine 的页表上，一批要么全分到、要么什么都不改。
# - 页数只看内存；`max_seq_len` 按池子封顶；页表最后一行指向一页不分给任何请求的占位页。
# - `forward_batch` 只算不排，在发射时为每个请求 `complete_one()`；新 token 先写进设备上的 token 池，CPU 副本等事件完成再读。
# - GPU 上主机与设备之间的拷贝都经锁页内存异步进行，事件记在 Engine 的流上；`examples/gpu_smoke.py` 检查这些路径。
# - 采样器排一次序同时做 top-k 和 top-p，“前面之和 ≥ p 才丢”保证第一名留下；随机数来自它自己的 Generator。

# %% tags=["remove-cell", "milestone-run"]
# 阶段一的里程碑页（docs/stages/correct/index.md）引用这几个单元的输出：同一次真实运行，章节页上不显示。
import re
import subprocess
import time

from minibook.hf import decode, encode

path = smollm2()
texts = ["The capital of France is", "Once upon a time,", "def fibonacci(n):", "Water boils at",
         "The three primary colors are", "import numpy as np\n", "My favourite fruit is", "1, 2, 3, 4,"]
max_tokens = [16, 8, 12, 4, 10, 6, 14, 2]
stage_engine = Engine(EngineConfig(model_path=path, max_running_req=8, page_size=4,
                                   num_page_override=64, max_seq_len_override=64))
sched = MiniScheduler(stage_engine)
peak, alloc = 0, sched.allocator.alloc_slots


def alloc_and_watch(reqs):  # 记下每一步分配之后用了几页
    global peak
    out_loc = alloc(reqs)
    peak = max(peak, sched.allocator.num_used_pages)
    return out_loc


sched.allocator.alloc_slots = alloc_and_watch
prompts = [encode(path, t) for t in texts]
started = time.perf_counter()
outputs, sizes = sched.generate(prompts, [SamplingParams(max_tokens=n) for n in max_tokens])
elapsed = time.perf_counter() - started
same = [out == hf_greedy(path, p, n) for p, out, n in zip(prompts, outputs, max_tokens)]
rows = ["| 提示 | 提示 token | 生成 | 输出 | 与 HF 一致 |", "| --- | ---: | ---: | --- | :---: |"]
for text, p, out, ok in zip(texts, prompts, outputs, same):
    shown = decode(path, out).replace("\n", "⏎").replace("|", "\\|")
    rows.append(f"| `{text.strip()}` | {len(p)} | {len(out)} | {shown} | {'✓' if ok else '✗'} |")
generated = sum(len(o) for o in outputs)
rows.append(f"\n共 {len(sizes)} 步（1 步 prefill + {len(sizes) - 1} 步 decode），每步的批大小 {sizes}；"
            f"提示共 {sum(map(len, prompts))} 个 token，生成 {generated} 个。KV 池 {stage_engine.num_pages} 页"
            f" × 4 token，最多同时用了 {peak} 页；结束后空闲 {sched.allocator.num_free_pages} / "
            f"{stage_engine.num_pages} 页，页表的行空闲 {sched.table.available_size} / 8。")
assert all(same) and sched.allocator.num_free_pages == stage_engine.num_pages
assert sched.table.available_size == 8
stage_engine.shutdown()
Markdown("\n".join(rows))

# %% tags=["remove-cell", "milestone-time"]
# NBVAL_IGNORE_OUTPUT
print(f"这台机器上：{elapsed:.1f} 秒，{generated / elapsed:.1f} token/s"
      f"（{torch.get_num_threads()} 个线程；随机器而变）")

# %% tags=["remove-cell", "milestone-checklist"]
from minibook import practice

collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                            "tests"], capture_output=True, text=True, check=True).stdout
total_tests = sum(1 for line in collected.splitlines() if "::" in line)
main_out = subprocess.run([sys.executable, "examples/ch06_engine.py"], capture_output=True, text=True,
                          check=True).stdout
agree = main_out.count("与 HF 一致：True")
free = re.search(r"结束后空闲页：(\d+) / (\d+)", main_out)
stage_ex = [ex for ex in practice.exercises() if ex.chapter <= 6]
checks = [
    ("python tools/steps.py check 0-6", "第 0–6 章逐章搭树、跑 main 和测试，汇总表下面是“合计：7 章通过，0 章失败”"),
    ("python tools/steps.py run 6 -- python examples/ch06_engine.py",
     f"{agree} 行“与 HF 一致：True”，结束后空闲页 {free.group(1)} / {free.group(2)}，页不够的一批什么都不改"),
    ("python tools/steps.py run 6 -- python -m pytest -q tests",
     f"收集到 {total_tests} 个测试（参数化展开后），没有 failed；没有 GPU 时只在 CUDA 上跑的几个是 skipped"),
    ("python tools/steps.py run 6 -- python examples/gpu_smoke.py",
     "没有 GPU：说明原因并跳过；有 GPU：最后一行是“全部通过”"),
    ("python practice/judge.py list",
     f"第 0–6 章的 {len(stage_ex)} 道题（第 {stage_ex[0].number}–{stage_ex[-1].number} 题）；逐道 start、test 做到通过"),
]
assert agree == 8 and free.group(1) == free.group(2)
Markdown("\n".join(f"- [ ] `{cmd}`  \n  应当看到：{expect}" for cmd, expect in checks))
