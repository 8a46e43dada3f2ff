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
# # 第 18 章 图捕获
#
# 一步 decode 只算几个 token，可模型的每一层还是那几十个算子：每个都要经过 Python、分派、检查形状，GPU 上还要各发射一次内核。批小的时候，这些“算子之外”的时间占了一大块，而且不随线程数变少。批大小固定时，一步 decode 的算子序列和每个张量的形状都是固定的，可以录下来反复用：GPU 上录成 [CUDA 图](../glossary.md#cuda-graph)，CPU 上交给 [torch.compile](../glossary.md#torch-compile) 编成一份融合过的 C++ 代码。本章按上游的结构做这件事：录哪些批大小、用占位请求补齐、固定的输入缓冲区、注意力后端的录制与重放钩子。本章的运行证明：走编译好的那份 decode，贪心输出与 Hugging Face 逐 token 相同；编译次数等于录的批大小个数，跑起来以后一次也不增加。

# %% tags=["remove-cell"]
from textwrap import indent

from IPython.display import Markdown

from minibook.page import *
setup(18)

import os
import sys

sys.path.insert(0, "examples")  # 测量的函数在 examples/ch18_bench.py 里


def in_fold(md) -> Markdown:
    """缩进 4 格：接在上一个 markdown 单元开头的 ??? 折叠框里。"""
    return Markdown(indent(md.data if isinstance(md, Markdown) else md, "    "))

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 为什么只录 decode，不录 prefill？
# 2. 录好的图为什么要求输入放在固定的缓冲区里？忘了刷新其中一块会怎样？
# 3. 录了 1、2、4、8 四个批大小，3 个请求的 decode 批怎么走？多出来的那一份写到哪里？
# 4. 编译好的 decode 在重放时为什么要设成“一重编就报错”？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. prefill 每批的 token 数都不同，形状不固定，录不完；它又是算力活，算子之外的开销相对很小。decode 每个请求 1 个 token，批大小只有几十种，而且是搬运活，每个算子都很短，发射和分派的开销占比最大。
#     2. CUDA 图录下的是内核和它们读写的地址，重放时不再运行任何 Python，只认那几块内存；CPU 上编译出的代码也按录制时的那组张量安排。某一块（比如 positions）不刷新，图读到的就是上一步（或录制时）留下的值：不报错，照样出词，只是错了。
#     3. 补一个占位请求凑到 4，走大小为 4 的那份。占位请求坐在页表的占位行上，K/V 写进不属于任何请求的占位页；它的 logits 不采样。
#     4. 编译结果装着守卫：编译时读到的 Python 值一变就要重编，一次几秒。录好以后还要重编，说明某个值被改了（或者代码读了不该读的东西），宁可当场报错，也不让一步 decode 悄悄慢上几千倍。

# %% [markdown]
# ## 本章要回顾的文件
#
# 第 6 章的 Engine（占位页、页表的占位行）、第 7 章调度器的 `_prepare_batch`、第 17 章的注意力后端（元数据全是张量，一步只算一次）。本章新建 `engine/graph.py`；修改 Engine（建 GraphRunner、decode 走重放）、`EngineConfig` 和启动器（录哪些批大小）、两个注意力后端（录制和重放的钩子）、调度器（补齐）、KV 池（写池子成了一个登记过的算子）和 `kernel/__init__.py`（给 C++ 算子登记假实现）。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch18_graph.py`：打印几种设置下录哪些批大小；截下一批补齐的 decode；用 tiny Qwen3 编译 1、2、4、8 四个批大小跑一批长短不一的请求，数编译次数、与 HF 比；最后故意不刷新 positions 缓冲区，看 SmolLM2 说出什么。CPU 上默认不编译（编译要时间），用 `cuda_graph_bs` / `--cuda-graph-max-bs` 打开：
#
# ```bash
# python tools/steps.py run 18 -- python examples/ch18_graph.py
# python tools/steps.py run 18 -- python examples/ch18_bench.py      # 本章的全部测量
# python tools/steps.py run 18 -- python -m minisgl --cuda-graph-max-bs 8
# ```
#
# ![一步 decode 走图：调度器补齐批、把输入拷进固定缓冲区，注意力后端把元数据拷进自己的缓冲区，然后重放录好的那份（GPU 上的 CUDA 图，CPU 上 torch.compile 编译出的代码）](../assets/ch18_graph.svg)
#
# ## 先量：矩阵乘之外还有多少
#
# SmolLM2，批大小 1，一步 decode（前向加采样）在 `torch.profiler` 下逐个算子执行一遍，再走编译好的那份执行一遍：

# %%
# NBVAL_SKIP
import torch

from ch18_bench import step_profile

prof = step_profile()
for mode, name in (("eager", "逐个算子"), ("compiled", "编译后")):
    p = prof[mode]
    print(f"{name}：一步 {p['total_ms']:.1f} ms（profiler 开着），调用 {p['aten_calls']} 个 aten 算子，"
          f"其中矩阵乘 {p['mm_ms']:.1f} ms")
print(f"（机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}，{torch.get_num_threads()} 个线程）")

# %% [markdown]
# 逐个算子执行时，一步要调用两千多个 aten 算子：每层的归一化、RoPE、切片、激活都是单独的一次调用，每次都要过一遍 Python 和分派。编译后只剩四百来个：121 个矩阵乘（inductor 把其中一半换成了带加法的 `addmm`）、两个自定义算子里面的调用、采样；归一化、RoPE、激活这些逐元素运算融合进了几十个 C++ 循环。但也看得出上限在哪里：矩阵乘占了一步的四分之三以上，编译不碰它们。图捕获能省的，只是矩阵乘之外的那一小块。
#
# ## 录哪些批大小，怎么补齐
#
# 每个批大小录一份。和上游一样，默认录 1、2、4，之后每 8 个一档；比同时在跑的请求数上限还大的档位用不上，去掉。GPU 上默认录到 160（上游在显存大于 80 GB 的卡上录到 256）；CPU 上默认不录，因为编译一个批大小要几秒到几十秒：

# %% tags=["remove-input"]
listing("minisgl/engine/graph.py", "capture_batch_sizes")

# %% [markdown]
# 批大小不在表里的 decode 批，[补上占位请求](../glossary.md#pad-batch)，凑到表里不小于它的第一档。占位请求是 Engine 建的一个 `Req`：坐在页表最后一行（第 6 章留下的占位行），只有 1 个 token，它的 K/V 写进占位页，不碰任何真实请求的缓存：

# %% tags=["remove-input"]
listing("minisgl/engine/graph.py", "GraphRunner.pad_batch")

# %% tags=["remove-input"]
listing("minisgl/scheduler/scheduler.py", "Scheduler._prepare_batch")

# %% [markdown]
# 补齐发生在调度器准备这一批的时候：分配槽位只给真实请求，占位请求的 `out_loc` 指向占位页；positions、注意力元数据都按补齐后的 `padded_reqs` 算。采样只取前 `batch.size` 行的 logits。练习 54 让你写这两步，连同检查。
#
# ## 固定的缓冲区和后端的三个钩子
#
# 录下来的那一步只认录制时的那几块内存。所以 GraphRunner 按最大的批大小分配输入缓冲区，每个批大小的那份用前 bs 个元素；每次重放前把这一步的输入原地拷进去：

# %% tags=["remove-input"]
listing("minisgl/engine/graph.py", "GraphInputs")

# %% [markdown]
# 注意力元数据也一样。每个后端实现三个钩子：`init_capture_graph` 分配元数据缓冲区，`prepare_for_capture` 让录制用的批指向它们，`prepare_for_replay` 把这一步已经算好的元数据原地拷进去。第 17 章把 paged 后端的元数据做成了三个 int32 张量，这里只是多了三块固定的缓冲区：

# %% tags=["remove-input"]
listing("minisgl/attention/paged.py", "PagedAttnBackend.prepare_for_replay")

# %% [markdown]
# ??? note "深入：SDPA 后端的缓冲区为什么要按页表宽度算"
#
#     SDPA 后端每步按这一批最长的请求排出 `kv_indices [B, K]`，K 每步都变；录下来的那份形状不能变，只能按页表的宽度 W（一个请求最长多少 token）分配，多出来的列由 `key_mask` 遮掉。所以这个后端走图时，每一步都按最长可能的序列算注意力。补齐的列填这一行最后一个真实 key 的槽位：它这一步刚写过，是有限的数；随便填一个槽位的话，没写过的槽位里可能是 nan，而 0 × nan 还是 nan。练习 55 让你写这一步。paged 后端只读 `seq_lens_k` 个 key，没有这个浪费，所以 CPU 上 decode 用它。

# %% tags=["remove-input", "fold"]
in_fold(listing("minisgl/attention/sdpa.py", "SDPAAttnBackend.prepare_for_replay"))

# %% [markdown]
# ## GPU：录一份 CUDA 图
#
# CUDA 图把一段 GPU 工作录成一张图：`torch.cuda.graph(g)` 里发出的内核不执行，只记下来（连同它们的参数和读写的地址），之后 `g.replay()` 一次把整张图交给 GPU。重放时不运行任何 Python：`if` 走哪条分支、张量多大、从哪块内存读，都定在了录制的那一刻。

# %% tags=["remove-input"]
listing("minisgl/engine/graph.py", "GraphRunner._capture_cuda")

# %% [markdown]
# 几个细节都来自 CUDA 图的规则（PyTorch 的文档写明了它们）：
#
# - **先跑一遍再录**。第一次调用时才做的初始化（cuBLAS 的句柄和工作区、懒加载的内核）不能发生在录制中。
# - **在自己的流上录**。录制不能在默认流上做；Engine 在第 6 章就建了自己的流，录制和之后的前向都在它上面。
# - **从大到小录，共用一个内存池**。录制期间分配的中间张量来自图的私有内存池，重放时原样复用；`pool=` 让几张图共用一个池子。它们不会同时重放，先录最大的那张，后面较小的图都放得进它留下的空间。
# - **录制中不能同步**。`.item()`、把张量拷回 CPU 都会让录制报错：前向里不能读张量的内容（第 6 章起 Engine 就守这条规矩，第 11 章数过同步次数）。
#
# 这条路径在 CPU 上走不到；`examples/gpu_smoke.py` 在借到 GPU 时检查它：录了 1、2、4 三张图，3 个请求的批补到 4 走重放，输出与不录图、与 HF 都相同。
#
# ## CPU：同一个结构交给 torch.compile
#
# CPU 上没有 CUDA 图。PyTorch 自己的编译器做的是同一类事：dynamo 在第一次调用时跟着 Python 字节码走一遍，把这一步的算子记成一张 FX 图；inductor 把图里的逐元素运算融合成几十个 C++ 循环（OpenMP 多线程、向量化），矩阵乘仍交给原来的库。GraphRunner 用同样的结构驱动它：每个批大小编译一次 `model.forward`，输入同样拷进固定的缓冲区：

# %% tags=["remove-input"]
listing("minisgl/engine/graph.py", "GraphRunner._compile_cpu")

# %% [markdown]
# `dynamic=False` 让每个批大小按确切的形状编译；`fullgraph=True` 要求整步是一张图，中途出现 dynamo 跟不过去的 Python（图断开）就报错，而不是悄悄退回逐个算子执行。后端就是 inductor，只是数一数它被叫了几次：

# %% tags=["remove-input"]
listing("minisgl/engine/graph.py", "GraphRunner._inductor")

# %% [markdown]
# 重放时，编译结果要一直能用。dynamo 给编译时读到的每个 Python 值装了[守卫](../glossary.md#guard)（张量的形状和 dtype、RMSNorm 的 eps、批的 phase……），一个不符就重编。重编一次要几秒：它该在编译时全部发生，而不是在服务中的某一步。所以重放包在 `fail_on_recompile` 里，要重编就报错：

# %% tags=["remove-input"]
listing("minisgl/engine/graph.py", "GraphRunner.replay")

# %% [markdown]
# 测试里改了一下最后一层 RMSNorm 的 eps，下一步 decode 就报错，错误里 dynamo 指出是哪个守卫、哪一行代码。练习 56 让你写一个同样规则的编译缓存：守卫只装在读到的名字上、连类型一起比、到上限后退回逐个算子执行。
#
# ## 写 KV 池：告诉编译器“我原地改它”
#
# 先看一个反例。把写 KV 池换回第 17 章的写法（`examples/ch18_bench.py` 的 `indexing_store_step` 在新进程里这样做），编译出来的一步比逐个算子执行还慢：

# %%
# NBVAL_SKIP
from ch18_bench import indexing_store_step

slow = indexing_store_step()
print(f"批 1，写 KV 池用下标赋值：逐个算子 {slow['eager_ms']:.1f} ms，编译后 {slow['compiled_ms']:.1f} ms")

# %% [markdown]
# 原因在写 KV 池的那一行：`k_cache(layer)[out_loc] = k` 是在一个视图上原地赋值。inductor 先把整张图变成“函数式”的（没有原地修改），再把能原地做的改回去；视图上的写入它改不回去，于是生成的代码把那一层的池子整个拷一份、改完再拷回去，每层每步都这样。测试把同样的写入编译一遍，数出生成的代码里每个循环的长度：

# %% tags=["remove-input"]
listing("tests/test_ch18_graph.py", "test_compiled_store_kv_writes_the_pool_in_place_without_copying_it")

# %% [markdown]
# 办法是把写池子做成一个登记过的 torch 算子，在签名里声明它[原地改写](../glossary.md#mutating-op)整个池子（`Tensor(a!)`）。编译器把它当作一次不透明的调用，不再去拷池子：上面那个测试里，编译出的代码只剩算 k、v 的那个 128 个数的循环。

# %% tags=["remove-input"]
listing("minisgl/kvcache/mha_pool.py", "_register_store_kv")

# %% [markdown]
# 第 17 章的 C++ 算子 `paged_attention` 也要让编译器认识：编译时不真的运行算子，只要知道输出的形状，所以加载后给它登记一个“假实现”（`register_fake`）。没有它，编译在第一次遇到这个算子时就报错。第 19 章把 `store_kv` 也换成 C++，同样的两件事再做一遍。

# %% tags=["remove-input"]
listing("minisgl/kernel/__init__.py", "_register_fakes")

# %% [markdown]
# ## 量：逐个算子和编译后
#
# `examples/ch18_bench.py` 在同一个引擎、同一批请求上量一步 decode（前向加采样）：每一步先后各跑一遍两种跑法（写进 KV 池的是同样的 K/V，贪心采样出同样的 token），两种跑法轮流先跑，取中位数。SmolLM2，每个请求 256 个 token 的提示：

# %% tags=["milestone"]
# NBVAL_SKIP
from ch18_bench import BATCHES, compile_seconds, cpp_wrapper_step, step_times

rows, same, steps = step_times()
for r in rows:
    print(f"批 {r['batch']:>2}：逐个算子 {r['eager_ms']:6.1f} ms   编译后 {r['compiled_ms']:6.1f} ms   "
          f"快 {r['eager_ms'] / r['compiled_ms']:.2f} 倍")
print(f"两种跑法的 {steps} 步 token 全部相同：{same}")
cpp = cpp_wrapper_step()
print(f"批  1，inductor 的 C++ 外壳：逐个算子 {cpp['eager_ms']:6.1f} ms   编译后 {cpp['compiled_ms']:6.1f} ms   "
      f"快 {cpp['eager_ms'] / cpp['compiled_ms']:.2f} 倍")
print(f"（机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}，{torch.get_num_threads()} 个线程）")

plt = pyplot()
fig, ax = plt.subplots(figsize=(6.4, 3.4))
x = range(len(rows))
ax.bar([i - 0.2 for i in x], [r["eager_ms"] for r in rows], width=0.4, label="逐个算子")
ax.bar([i + 0.2 for i in x], [r["compiled_ms"] for r in rows], width=0.4, label="编译后")
ax.set_xticks(list(x), [f"批 {r['batch']}" for r in rows])
ax.set_ylabel("一步 decode（ms，中位数）")
ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# 编译后快了一些，但不多：这次运行里三个批大小都在 1.06～1.09 倍之间。省下的几毫秒，正是上面看到的矩阵乘之外的那一块（批 32 时还有注意力）。这台机器是共享的，同样的测量前后几次能差几个百分点（另一次负载更高时，批 8 和批 32 的差别落在噪声之内），所以这几个比例只读“快一点”，别读小数点后的那位。三个批大小、几十步的 token 两种跑法完全相同。inductor 默认用 Python 写“依次调用各个内核”的那层外壳；`TORCHINDUCTOR_CPP_WRAPPER=1` 让它用 C++ 写，批 1 时的比例和 Python 外壳的差别同样在噪声之内：每步只有几百次调用，外壳本来就不贵。GPU 上是另一回事：那里一个小内核只算几微秒，和从 CPU 发射它的开销是同一个量级，CUDA 图省下的比例要大得多（`gpu_smoke.py` 在借到 GPU 时量这个比例；这台机器上没有 GPU，本页不给这个数）。CPU 上“发射”就是一次函数调用，一步的时间几乎就是读一遍权重的时间。要再快，只能少读字节：第 19 章的 int8、int4 权重。
#
# 编译要时间。inductor 把编译结果缓存在磁盘上（`TORCHINDUCTOR_CACHE_DIR`，默认在 `/tmp` 下），同样的图第二次编译时直接取；dynamo 跟踪字节码那一步每个进程都要重做。在新进程里编译同样三个批大小，先用一个空的缓存目录，再用同一个目录：

# %%
# NBVAL_SKIP
import tempfile

with tempfile.TemporaryDirectory() as cache:
    cold = compile_seconds(cache_dir=cache)
    warm = compile_seconds(cache_dir=cache)
print(f"编译批大小 {BATCHES}：冷缓存 {cold:.1f} 秒，热缓存 {warm:.1f} 秒")
print(f"（机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}）")

# %% [markdown]
# 冷缓存时，SmolLM2 的三个批大小要编一分多钟；热缓存时只剩 dynamo 跟踪字节码的十来秒。这就是 CPU 上默认不编译的原因：每次建引擎都要付这笔时间，而批 1 一步只省几毫秒，要生成上千个 token 才赚得回来。测试套件在同一台机器上只付一次冷编译，之后的测试都从磁盘缓存取。
#
# ## 错的版本：positions 不刷新
#
# 固定缓冲区最容易出的错，是某一块忘了刷新。main 的最后一段把 `GraphInputs.fill` 换成一个不拷 positions 的版本：

# %% tags=["remove-input"]
listing("examples/ch18_graph.py", "fill_without_positions")

# %% [markdown]
# ## 运行

# %%
run("python examples/ch18_graph.py")

# %% tags=["remove-cell"]
# 下面几段话引用的数字，就是上面这次运行打印的
main_out = output_of("python examples/ch18_graph.py")
for expected in ("GPU 默认（录到 160）：[1, 2, 4, 8, 16, 24,", "CPU 默认：[]",
                 "真实请求 3 个，补齐到 4 个：uid = [0, 1, 2, -1]", "用过的 (input_ids, positions) 地址对 1 个",
                 "建引擎时编译了 4 次", "跑完之后编译次数：4", "[True, True, True, True, True, True]",
                 "与 HF 逐 token 相同：True", "与 HF 逐 token 相同：False"):
    assert expected in main_out, expected

# %% [markdown]
# 值得注意的几处：
#
# - 3 个请求的 decode 批补齐到 4，占位请求的 uid 是 −1，位置 0，`out_loc` 指向占位页的槽位；每一步的输入都拷进同一块缓冲区（地址只有一组）。
# - 6 个长短不一的请求陆续结束，decode 批从 6 个（补到 8）一路变成 1 个，四份编译结果都用上了；跑完之后编译次数仍是 4，6 个请求都与 HF 相同。
# - 不刷新 positions 的那一次，第一个 token 来自 prefill（不走图），是对的；之后每一步图里读到的位置都是录制时留在缓冲区里的 0，RoPE 把每个新 token 都当成序列的第一个：模型照样说英语，可说的不是 HF 的那句话。没有报错，也不会有：只有和参照逐 token 比才抓得住它，本章的测试就这样比。
#
# ## 与上游的差异
#
# 上游以固定的提交 20fcd7f 为准。
#
# - 我们在 CPU 上用同样的结构驱动 `torch.compile`，上游只有 CUDA 图，因为上游只跑在 GPU 上；GPU 上我们录 CUDA 图的做法和上游一样（从大到小、共用一个内存池、在 Engine 的流上录）。`python/minisgl/engine/graph.py` · `GraphRunner._capture_graphs`
# - 我们把录制时那一步的输出张量留着当作 logits 的固定输出，上游另外分配一块 `logits` 缓冲区、在图里把输出拷进去；两者都是重放后从固定的地址读 logits，我们少一次拷贝。`python/minisgl/engine/graph.py` · `GraphCaptureBuffer`
# - 上游的 `can_use_cuda_graph` 只看批大小，我们的 `can_replay` 还要求补齐后的大小正好录过：不经过调度器、没补齐的批（第 6 章 main 里的迷你调度器就是这样）照常逐个算子执行，而不是在字典里找不到图。`python/minisgl/engine/graph.py` · `GraphRunner.can_use_cuda_graph`
# - 上游 GPU 上的默认档位按显存大小选 160 或 256，我们在 GPU 上固定 160；CPU 上默认不录。`python/minisgl/engine/graph.py` · `_determine_cuda_graph_bs`
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 录哪些批大小与缓冲区：`python/minisgl/engine/graph.py` · `_determine_cuda_graph_bs`（第 49～67 行）、`python/minisgl/engine/graph.py` · `GraphCaptureBuffer`（第 20～46 行）
# - 录制、补齐、重放：`python/minisgl/engine/graph.py` · `GraphRunner._capture_graphs`（第 105～147 行）、`python/minisgl/engine/graph.py` · `GraphRunner.pad_batch`（第 160～166 行）、`python/minisgl/engine/graph.py` · `GraphRunner.replay`（第 152～158 行）
# - FlashInfer 后端的钩子：`python/minisgl/attention/fi.py` · `FlashInferBackend.init_capture_graph`（第 227～234 行）、`python/minisgl/attention/fi.py` · `FlashInferBackend.prepare_for_capture`（第 244～264 行）、`python/minisgl/attention/fi.py` · `FlashInferBackend.prepare_for_replay`（第 266～271 行）
#
# ## 测试
#
# 本章的测试在 `tests/test_ch18_graph.py`：录哪些批大小；坏的设置是一条中文错误，启动器的旗标和上游同名；tiny Qwen3 在重叠开和关时、SmolLM2 在 torch 和 paged 两种后端下，走编译好的 decode 与 HF 逐 token 相同，补齐的每一档都真的用过，编译次数不增加；改了守卫盯着的值，重放报错而不是重编；写 KV 池不拷池子（连同对照）；positions 不刷新时输出和 HF 不同。比 HF 的那个：

# %% tags=["remove-input"]
listing("tests/test_ch18_graph.py", "test_compiled_decode_equals_hf_and_never_recompiles")

# %%
run("python -m pytest -q --color=no tests/test_ch18_graph.py")

# %% [markdown]
# ## 怎么讲清楚
#
# decode 一步的算子序列和形状只取决于批大小，所以每个批大小录一份，之后每步只“放”：GPU 上是 CUDA 图，省掉逐个发射内核；CPU 上是 torch.compile，省掉逐个分派、把逐元素运算融合起来。代价是三条规矩：批要补齐到录过的大小（占位请求写占位页）；输入和注意力元数据都要原地拷进录制时的缓冲区，漏一块就悄悄算错；录好以后不许重编。CPU 上还多一条：写 KV 池要告诉编译器是原地改，不然它每层都把池子拷一遍。

# %% [markdown]
# ## 练习
#
# 1. **档位的代价**。录 1、2、4，再每 8 个一档时，一批 decode 最多补多少个占位请求？把档位改成每 4 个一档，补齐的浪费和录制的代价各怎么变？
# 2. **哪些值会让重编**。下面哪些改动会让编译好的 decode 在下一步重编：换一个请求的 temperature；换一个请求的 max_tokens；改 RMSNorm 的 eps；把一个请求从批里拿掉？
# 3. **挑战：prefill 也走图**。prefill 的 token 数每批都不同。如果也想给它录图，要把什么补齐到固定的档位？注意力元数据又要怎样？
#
# ??? success "参考答案"
#
#     1. 8 以后每档差 8，最多补 7 个（9 个请求补到 16）；1、2、4 之间最多补 1 个（3 补到 4），4 到 8 之间最多补 3 个。每 4 个一档时最多补 3 个，档位数翻倍，录制时间和（GPU 上）图占的内存也大约翻倍。
#     2. temperature 和 max_tokens 都不会：采样和“什么时候结束”都在图外面，前向里读不到它们。改 eps 会：它是编译时读到的 Python 数，被当成常数编进了代码（本章的测试就这样触发重编）。拿掉一个请求也不会：批大小变了就换用另一档（或者补齐到原来那档）。
#     3. 把这一批的 token 总数补到固定的档位（补的 token 属于占位请求、写占位页），每个请求的 query 数、key 数放进固定大小的张量；注意力要用能按这些张量处理不规则批的内核（像 FlashInfer 的 ragged prefill）。SGLang 的“分段 CUDA 图”做的就是这件事；本书不做，因为 prefill 是算力活，省下的发射开销相对很小。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 54   # 把第 54 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 54    # 判题
# python practice/judge.py hint 54    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - decode 每步的算子和形状只取决于批大小：每个批大小录（编译）一份，之后每步只重放。
# - 档位是 1、2、4，再每 8 个一档；不在表里的批补上占位请求，占位请求坐占位行、写占位页。
# - 输入和注意力元数据原地拷进录制时的缓冲区；漏刷新一块，输出照样通顺，但是错的。
# - CPU 上用 torch.compile：每个批大小编译一次，重放时不许重编；写 KV 池的算子要声明原地改写，C++ 算子要有假实现。
