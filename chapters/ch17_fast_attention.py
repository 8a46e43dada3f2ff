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
# # 第 17 章 更快的注意力后端
#
# 第 5 章的[注意力后端](../glossary.md#attention-backend)每一层都先按页表把整批的 K/V 拷成一块，再交给 SDPA：批大、上下文长时，这份副本每步要写一遍、读一遍，能比模型的权重还多。GPU 上的 FlashInfer、FlashAttention 不拷，它们隔着页表直接读 KV 池，元数据每步只整理一次。本章在 CPU 上做同样的事：一个 C++ 的[分页注意力](../glossary.md#paged-attention)算子，一个 prefill 用 SDPA、decode 用它的[混合后端](../glossary.md#hybrid-backend)。本章的运行证明：三种后端的贪心输出都与 Hugging Face 逐 token 相同，decode 不再拷 K/V。

# %% tags=["remove-cell"]
from textwrap import indent

from IPython.display import Markdown

from minibook.page import *
setup(17)

import os
import sys

sys.path.insert(0, "examples")  # 测量的函数在 examples/ch17_bench.py 里


def in_fold(md) -> Markdown:
    """缩进 4 格：接在上一个 markdown 单元开头的 ??? 折叠框里。"""
    return Markdown(indent(md.data if isinstance(md, Markdown) else md, "    "))

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 注意力后端的元数据为什么每步只算一次，而不是每层算一次？
# 2. FlashInfer 的 `kv_indptr`、`kv_indices`、`last_page_len` 各说的是什么？
# 3. 同一个 C++ 算子也能算 prefill，为什么 prefill 还是交给 SDPA？
# 4. 重叠调度时，一块每步重用的元数据缓冲区，什么时候才能写？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 它只取决于这一批每个请求的长度和页表行，和层无关；SmolLM2 有 30 层，每层重算一遍就多做 29 次。
#     2. 每个请求用到的页首尾相接放在 `kv_indices` 里，`kv_indptr` 标出每个请求从哪里开始，`last_page_len` 说最后一页用了几个槽位。
#     3. prefill 每个请求有很多 query，是算力活（计算受限），SDPA 把它们组织成分块的矩阵乘；逐个 query 扫一遍 key 的算子在这里不占优。decode 只有一个 query，是搬运活（访存受限），要紧的是少读少拷。
#     4. 等还在读它的那一批做完以后：要么每步用新张量，要么把“写进去”也排到流上，跟在上一批的前向后面。

# %% [markdown]
# ## 本章要回顾的文件
#
# 第 5 章的 `attention/`（接口和 SDPA 后端）、第 6 章的 Engine（按名字创建后端）。本章新建 `attention/paged.py`、`attention/layout.py`，修改后端的登记、`EngineConfig` 的默认值和启动器的命令行参数；`kernel/` 是本书第一次用 C++，在这里提前引入，怎么编译、登记、给图捕获用，第 19 章讲。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch17_fast_attention.py`：在真实引擎里截下一批 prefill 和一批 decode，打印页表、paged 后端的元数据和两种 GPU 库要的同一份信息；量一层 decode 注意力；最后用三种后端跑 SmolLM2，与 HF 比。第一次运行时会编译 C++ 算子（十几秒，之后从缓存加载）。
#
# ```bash
# python tools/steps.py run 17 -- python examples/ch17_fast_attention.py
# python tools/steps.py run 17 -- python examples/ch17_bench.py     # 本章的全部测量
# python tools/steps.py run 17 -- python -m minisgl --attention-backend torch,paged
# ```
#
# ![一步 decode：prepare_metadata 每步一次；torch 后端每层按页表拷出 K/V 再 SDPA，paged 后端隔着页表直接读 KV 池；混合后端 prefill 用 SDPA、decode 用 paged](../assets/ch17_paged_decode.svg)
#
# ## 先量：参考后端每步都在拷 K/V
#
# 真实引擎，SmolLM2，32 个请求、每个 256 个 token 的上下文，一起 decode。`torch.profiler` 记下一步里的算子：

# %%
# NBVAL_SKIP
import torch

from ch17_bench import HEAD_DIM, HKV, LAYERS, gathered_mib, step_profile

BATCH, CONTEXT = 32, 256
before = step_profile("torch", BATCH, CONTEXT)
print(f"一步 decode {before['total_ms']:.0f} ms（profiler 开着，会慢一些），其中")
print(f"  按页表拷出 K/V（index_select）：{before['gather_ms']:.0f} ms（{before['gather_ms'] / before['total_ms']:.0%}）")
print(f"  SDPA：{before['sdpa_ms']:.0f} ms（{before['sdpa_ms'] / before['total_ms']:.0%}）")
print(f"每步拷出的 K/V：{gathered_mib(BATCH, CONTEXT) * LAYERS:.0f} MiB（{LAYERS} 层 × 2 × {BATCH} × {CONTEXT} × "
      f"{HKV} 个 KV 头 × {HEAD_DIM} × 4 字节）")
print(f"（机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}，{os.cpu_count()} 个核，{torch.get_num_threads()} 个线程）")

# %% [markdown]
# 拷贝不是注意力本身：它只是把已经在池子里的数换个地方放，而且和整批的上下文总长度成正比地涨。和权重比一比：

# %%
import math

from safetensors import safe_open

from ch17_bench import gathered_mib as copied_mib
from minibook.models import smollm2

with safe_open(str(smollm2() / "model.safetensors"), "pt") as f:
    params = sum(math.prod(f.get_slice(name).get_shape()) for name in f.keys())
weights_mib = params * 4 / 2**20
print(f"SmolLM2 的 float32 权重：{weights_mib:.0f} MiB（每步 decode 都要读一遍）")
for batch, context in ((8, 1024), (32, 1024), (32, 4096)):
    step = copied_mib(batch, context) * 30
    print(f"批 {batch:>2}、上下文 {context}：torch 后端每步拷出 {step:5.0f} MiB 的 K/V，是权重的 {step / weights_mib:.1f} 倍")
assert copied_mib(32, 1024) * 30 > weights_mib
#
# ## plan 一次，每层 run：GPU 后端的样子
#
# FlashInfer 把一步分成两半：`plan()` 在前向之前整理元数据（一次），`run()` 在每一层读它（[plan / run](../glossary.md#plan-run)）。它要的元数据是“不规则”的页列表，FA3 要的是矩形的块表；两者都能从我们的页表算出来：

# %% tags=["remove-input"]
listing("minisgl/attention/layout.py", "flashinfer_layout")

# %% [markdown]
# main 的第一部分在真实引擎里截下一批 prefill（请求 0 借用了 8 个 token 的前缀缓存）和接着的一批 decode，把同一份信息按三种排法打印出来：

# %%
run("python examples/ch17_fast_attention.py")

# %% tags=["remove-cell"]
# 下面一段话引用的数字，就是上面这次运行打印的
main_out = output_of("python examples/ch17_fast_attention.py")
for expected in ("= [(8, 3, 11), (0, 2, 2)]", "kv_indices=[0, 1, 2, 3]，last_page_len=[3, 2]", "qo_indptr=[0, 3, 5]",
                 "每份元数据被 run 的次数 = [4]（模型有 4 层）"):
    assert expected in main_out, expected

# %% [markdown]
# 三种排法说的是同一批槽位：请求 0 的 11 个 key 在 0、1、2 号页（最后一页用了 3 个），请求 1 的在 3 号页。FlashInfer 和 FA3 只要页号，页内的偏移自己算，所以页表必须守第 4 章的规则：第 j 个 token 在它的第 j // page_size 页、偏移 j % page_size（练习 51 让你写这个转换，连同检查）。最后一行是本章要的性质：每份元数据被 4 层各用一次，plan 每步只做一次。
#
# ## 隔着页表读：paged 算子
#
# 我们的 paged 后端直接用自己的页表，元数据只有三个 int32 张量，每步建一个张量再切成三段：

# %% tags=["remove-input"]
listing("minisgl/attention/paged.py", "PagedAttnBackend")

# %% [markdown]
# 算子把一批里全部 query token 排成一列，每个 (token, KV 头) 是一份独立的活，交给 torch 的线程池。一份活按槽位逐行读池子：

# %% tags=["remove-input"]
listing("minisgl/kernel/csrc/paged_attention.cpp", "attend_one")

# %% [markdown]
# 两遍：第一遍算分数和最大值，第二遍按 softmax 权重累加 V。同一个 KV 头的 G 个 q 头（GQA 的一组）一起算，每行 K、V 从内存里只读一次。[右下角对齐](../glossary.md#causal-mask)的因果掩码变成一个数 `visible`（这里的 `n`）：decode 时就是全部 key，prefill 时第 i 个 query 看见前 n_k − n_q + i + 1 个。
#
# ??? note "深入：一份活怎么找到自己的请求"
#
#     `qo_indptr` 是前缀和，第 t 个 token 属于最后一个起点 ≤ t 的请求：`std::upper_bound` 二分查找。`visible` 由这个请求的 key 数、query 数和 t 在请求里的位置算出。开头那一串 `TORCH_CHECK` 把要读的每个槽位都查一遍：坏的元数据是一条中文错误，而不是越界读内存。

# %% tags=["remove-input", "fold"]
in_fold(listing("minisgl/kernel/csrc/paged_attention.cpp", "paged_attention"))

# %% [markdown]
# ??? note "深入：算子怎么进的 torch：TORCH_LIBRARY 和一次编译"
#
#     文件末尾的 `TORCH_LIBRARY(minisgl, m)` 声明算子的签名，`TORCH_LIBRARY_IMPL(minisgl, CPU, m)` 给出 CPU 上的实现：加载这个 .so 时登记就完成了，Python 这边不需要绑定代码，调用写成 `torch.ops.minisgl.paged_attention(...)`。`kernel/__init__.py` 用 `torch.utils.cpp_extension` 调 g++ 和 ninja 编译（`-O3 -march=native -fopenmp`），产物按“源码 + 编译选项 + CPU 的指令集 + torch 和 Python 的版本”的摘要命名，放进 torch 的扩展缓存：同样的源码在哪一章的树里都只编一次，测试套件只付一次编译的时间。没有编译器的机器上，`auto` 退回 torch 后端并打印一行原因，点名要 `paged` 的则在建引擎时报错（测试里把 `CXX` 指向一个不存在的程序试过）。登记的细节、给 `torch.compile` 用的假实现，都在第 19 章。
#
# ## 不拷以后，每一格都更快
#
# `examples/ch17_bench.py` 用真实的 KV 池、页表和分配器（每个请求的提示占一段连续的槽位，decode 的新 token 交错），量一层 decode 注意力（存这一步的 K/V + 注意力），两个后端轮流各量 3 轮取中位数：

# %% tags=["milestone"]
# NBVAL_SKIP
from ch17_bench import layer_grid, print_layer_grid

rows = layer_grid()
print_layer_grid(rows)
print(f"（机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}）")

plt = pyplot()
fig, axes = plt.subplots(1, 3, figsize=(11, 3.6), sharey=False)
for ax, batch in zip(axes, sorted({r["batch"] for r in rows})):
    sub = [r for r in rows if r["batch"] == batch]
    ctx = [r["context"] for r in sub]
    ax.plot(ctx, [r["torch_ms"] for r in sub], "o-", label="torch（先拷再 SDPA）")
    ax.plot(ctx, [r["paged_ms"] for r in sub], "s-", label="paged（隔着页表读）")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_title(f"批大小 {batch}")
    ax.set_xlabel("上下文长度（token）")
axes[0].set_ylabel("一层的时间（ms，中位数）")
axes[0].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# 每一格 paged 都更快：省下的是写一份副本、再读一遍副本，批越大、上下文越长，副本越大。批大小 1、上下文很长时，一个请求只有 3 个 KV 头，也就只有 3 份活：多出来的核闲着，这是 GPU 上 split-K（“flash decoding”）要解决的事，练习 52 写它合并的那一步。
#
# ## prefill 交给 SDPA：混合后端
#
# 同一个算子也能算 prefill，但在这里它比 SDPA 慢。一个 512 个 token 的提示，两个后端各算一层：

# %%
# NBVAL_SKIP
from ch17_bench import prefill_compare

p = prefill_compare()
print(f"一个 512 个 token 的提示，prefill 注意力一层：torch（SDPA）{p['torch']:.1f} ms，paged {p['paged']:.1f} ms"
      f"（paged / SDPA = {p['paged'] / p['torch']:.2f}）")

# %% [markdown]
# prefill 有很多 query，SDPA 把它们组织成分块的矩阵乘，一块 K 读进缓存给很多 query 用；我们的算子每个 query 单独扫一遍 key，在这里没有优势。所以和上游一样，用两个后端：

# %% tags=["remove-input"]
listing("minisgl/attention/base.py", "HybridBackend")

# %% tags=["remove-input"]
listing("minisgl/attention/__init__.py", "resolve_attention_backend")

# %% [markdown]
# 名字和上游一样写成“prefill 的,decode 的”；`auto` 在 CPU 上就是 `torch,paged`，是 `EngineConfig` 和启动器的默认值。`LLM(..., attention_backend="torch")` 或 `--attention-backend torch` 换回第 5 章的后端，名字写错是一行中文错误。
#
# ## 元数据缓冲区：有在途的批就不能写
#
# 每步新建元数据张量是几次小分配；想省掉它们，自然的做法是预先分配一块缓冲区，每步写进去。上游的 FlashInfer 后端这样做出过错（#103）：`plan()` 把元数据放进一块重用的锁页内存，发起异步拷贝；重叠调度时下一步的 `plan()` 在拷贝完成之前就改写了它。我们的工作线程上也有同样的结构。`examples/ch17_plan_race.py` 写了两个重用缓冲区的后端，一个在调度器线程上当场写，一个把“写进去”排到工作线程上：

# %% tags=["remove-input"]
listing("examples/ch17_plan_race.py", "ReusedBuffer")

# %% tags=["remove-input"]
listing("examples/ch17_plan_race.py", "WrittenOnTheStream")

# %% [markdown]
# ??? note "深入：让竞态每次都发生的放大镜"
#
#     重叠时，下一批的 plan 本来就落在这一批前向的某个时刻，但落在读元数据之前还是之后看运气：多数时候出错，有时悄悄算错，偶尔碰巧对了。演示的四个后端都继承 `Magnified`：每批的第 0 层先等下一批的元数据写完（最多 0.5 秒），于是结果每次一样。不重叠时等满 0.5 秒再继续，什么也不改变。

# %% tags=["remove-input", "fold"]
in_fold(listing("examples/ch17_plan_race.py", "Magnified"))

# %%
run("python examples/ch17_plan_race.py")

# %% [markdown]
# 重叠时，调度器线程为第 N+1 批写元数据的那一刻，工作线程上第 N 批的前向还在跑：它后面的层读到的是别人的长度，算子发现 `qo_indptr` 对不上 q 的 token 数，错误经工作线程传回 `generate`（长度碰巧对得上时，就是悄悄算错的 token）。规矩：一块缓冲区只要还有在途的批在读，主机就不能写。paged 后端每步用新张量；要重用缓冲区，写入就排到流上（下一章的图捕获就是这样喂固定的输入缓冲区）。页表本身也在前向时被算子读着、被调度器写着：它不违反这条规矩，因为调度器只写在途的批不读的位置（新分到的槽位），而结束的请求要等在途的批做完才还行（第 11 章的规矩 3）。
#
# ## 运行
#
# 上面 main 的输出里值得注意：
#
# - 一批 prefill 里请求 0 缓存了 8 个、这一步算 3 个，`qo_indptr=[0, 3, 5]`；decode 时每个请求 1 个 query，`qo_indptr=[0, 1, 2]`，`seq_lens_k` 各加 1。
# - 每份元数据被 4 层各用一次。
# - 三种后端各自的 4 个请求都与 HF 一致；`auto` 选出的是 prefill 用 SDPA、decode 用 paged 的混合后端。
#
# 整个模型一步 decode 的时间（不开 profiler，不重叠，上下文 512）。注意力只是一步里的一部分（上面量的：批 32 时拷贝和 SDPA 合起来不到三成），所以整步的收益比一层小，批小时在抖动之内：

# %%
# NBVAL_SKIP
from ch17_bench import step_compare

for r in step_compare():
    print(f"批 {r['batch']:>2}：torch {r['torch_ms']:7.1f} ms   auto（torch,paged）{r['auto_ms']:7.1f} ms   "
          f"快 {r['torch_ms'] / r['auto_ms']:.2f} 倍")
print(f"（机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}）")

# %% [markdown]
# ## 与上游的差异
#
# 上游以固定的提交 20fcd7f 为准。
#
# - 我们在 CPU 上用自己的 C++ 算子读页表，上游在 GPU 上调 FlashInfer、FlashAttention 3、TensorRT-LLM 的内核，因为那些库只有 CUDA 版本。`python/minisgl/attention/fi.py` · `FlashInferBackend.forward`
# - 我们的元数据是每步新建的三个 int32 张量，上游 FlashInfer 的元数据有 CPU 和 GPU 两份、经一块重用的锁页内存异步拷过去，因为 FlashInfer 的 `plan()` 要在 CPU 上排好工作划分；所以上游要等上一次拷贝完成（#103 的修复），我们不用。`python/minisgl/attention/fi.py` · `FlashInferBackend.prepare_metadata`
# - 我们的 `auto` 在 CPU 上选 `torch,paged`，上游按 GPU 的架构选，因为两边能用的内核不同；混合后端的写法（“prefill 的,decode 的”）一样。`python/minisgl/attention/__init__.py` · `create_attention_backend`
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 接口与混合后端：`python/minisgl/attention/base.py` · `BaseAttnBackend`（第 18～34 行）、`python/minisgl/attention/base.py` · `HybridBackend`（第 37～63 行）
# - 按名字创建：`python/minisgl/attention/__init__.py` · `create_attention_backend`（第 52～68 行）
# - FlashInfer：`python/minisgl/attention/fi.py` · `FlashInferBackend.prepare_metadata`（第 190～225 行）、`python/minisgl/attention/fi.py` · `FlashInferBackend.forward`（第 176～188 行）
# - FlashAttention：`python/minisgl/attention/fa.py` · `FlashAttentionBackend.prepare_metadata`（第 67～105 行）、`python/minisgl/attention/fa.py` · `FlashAttentionBackend.forward`（第 48～65 行）
#
# ## 测试
#
# 本章的测试在 `tests/test_ch17_fast_attention.py`：C++ 算子和 SDPA 在随机的不规则批次上一致（float32、bfloat16，GQA，打乱的槽位，没被页表指到的槽位填 nan）；坏的元数据是一条中文错误；整个引擎用 paged、torch,paged、auto 时与 HF 相同（共享前缀、分块 prefill、重叠开着）；decode 的一步里没有 index_select；元数据每步一份、全是张量；没有编译器时的退路；FlashInfer、FA3 的布局和页表指向同一批槽位；元数据缓冲区的竞态。数 index_select 的那个：

# %% tags=["remove-input"]
listing("tests/test_ch17_fast_attention.py", "test_decode_reads_the_pool_in_place_instead_of_copying_each_layer")

# %%
run("python -m pytest -q --color=no tests/test_ch17_fast_attention.py")

# %% [markdown]
# ## 怎么讲清楚
#
# 注意力后端要做的事每层都一样：存这一步的 K/V，按页表找到每个请求的全部 K/V，算注意力。快的后端把“找”变成元数据，每步整理一次；再把“读”交给一个隔着页表读池子的内核，不先拷成一块：批 32、上下文 1024 的 SmolLM2，每步少拷 1.4 GiB，比权重还多。decode 是搬运活，用这种内核；prefill 是算力活，用分块矩阵乘的 SDPA。重用元数据缓冲区时，写入要排在还在读它的那一批之后。

# %% [markdown]
# ## 练习
#
# 1. **页大小和块表**。page_size 从 1 改到 16，FA3 的块表和 FlashInfer 的 `kv_indices` 各变成原来的多少？我们的 paged 算子的元数据变不变？
# 2. **切开 key：CPU 上的 split-K**。批大小 1、上下文 4096 时，我们的算子只有 3 份活（3 个 KV 头）。怎样把它们切得更细，又不改变结果？
# 3. **挑战：GPU 版的 paged 算子**。把 `attend_one` 改写成 CUDA 内核：一个线程块负责一份活，块内怎么分工？需要改 `TORCH_LIBRARY_IMPL` 的哪一行？
#
# ??? success "参考答案"
#
#     1. 都变成约 1/16（每 16 个 token 一个页号），`last_page_len` 从全是 1 变成 1 到 16。我们的算子直接读 token 粒度的页表，元数据只有行号和长度，不变。
#     2. 把每个请求的 key 按块切开，每块单独算出输出和 log-sum-exp，最后按 log-sum-exp 加权合并（练习 52）：活的份数变成 3 × 块数，结果在浮点误差内不变。
#     3. 线程块里的线程分 key：每个线程算一部分 key 的分数，块内归约出最大值和分母，再分 d 维累加 V；G 个 q 头放在同一个块里，K、V 的每行读进共享内存一次。再加一个 `TORCH_LIBRARY_IMPL(minisgl, CUDA, m)`，实现用 CUDA 内核的那个函数。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 51   # 把第 51 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 51    # 判题
# python practice/judge.py hint 51    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - 注意力后端的元数据只和每个请求的长度、页表行有关：每步 plan 一次，每层 run。
# - FlashInfer 的不规则页列表和 FA3 的块表都能从我们的页表算出来；页表要守“第 j 个 token 在第 j // page_size 页”的规则。
# - paged 算子隔着页表读 KV 池，decode 不再每层拷 K/V；prefill 仍交给 SDPA，`auto` 在 CPU 上就是这个混合后端。
# - 有批次在途时，元数据缓冲区不能在主机上改写：每步新张量，或者把写入排到流上。
