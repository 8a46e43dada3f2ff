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
# # 第 21 章 基准测试与消融
#
# 前二十章每章都说“这一项让引擎更快”，各章量的是自己那一项：第 9 章比命中率，第 11 章量前向等 CPU 的空隙，第 18 章比一步 decode。本章把它们放到同一份负载、同一次运行里。先写两种压测：离线（一批请求交给 `LLM.generate`），和在线（真的服务器、请求按[泊松过程](../glossary.md#poisson-arrivals)到达、量 [TTFT](../glossary.md#ttft)、[TPOT](../glossary.md#tpot)、[ITL](../glossary.md#itl) 的 [P50 和 P99](../glossary.md#percentile)）。再用在线压测做一张[消融](../glossary.md#ablation)表，每一行只比全开的配置少一项，最后和 HF、llama.cpp 在同一份 token 上比。这一章不给引擎加功能，加的是量它的工具和量出来的数：在 2 个 CPU 核上，关掉前缀缓存吞吐降到 0.82×，int4 权重让吞吐到 1.48×（输出也变了），为 GPU 设计的几项（TP、重叠、编译）显不出收益。

# %% tags=["remove-cell"]
from minibook.page import *
setup(21)

import os
import sys

sys.path.insert(0, "examples")  # 消融和同行对比的函数在 examples/ch21_ablation.py 里

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 压测时提示为什么用随机的 token id，而不是真实的句子？随机 id 会让哪一项优化显不出来？
# 2. 16 个请求同时到达，一个请求的 TTFT 是 2 秒、TPOT 是 60 毫秒、生成 100 个 token。它从发出到结束用了多久？
# 3. 一个流式请求生成了 50 个 token，却只收到 45 段文字。TPOT 该除以 49 还是 44？ITL 有几个？
# 4. 一个优化关掉之后吞吐只降了 2%，能说它只值 2% 吗？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 压测量的是引擎，不是模型说了什么：随机 id 让长度可控（在线时 id 先解码成文字、服务器再分词，token 数会变一点），同一个种子每次得到同一批请求。但随机提示之间没有公共前缀，前缀缓存一个 token 也命不中——所以本章的负载另给每个提示接上同一段“系统提示”，像真实的聊天服务那样。
#     2. 2 + 0.06 × 99 ≈ 7.9 秒：第一个 token 在 2 秒时到，之后还有 99 个间隔。
#     3. TPOT 除以 49：它是“每个输出 token”的平均时间，token 数从服务器的 `usage` 读，不数段数（半个字被扣住时一段里有两个 token）。ITL 是相邻两段的间隔，44 个。
#     4. 不能：消融量的是“其余都开着时少了它损失多少”，两项互相替代时关掉任一项都损失不大，有的优化又要另一项开着才显出来。而且这个数只对这台机器、这份负载成立。

# %% [markdown]
# ## 本章要回顾的文件
#
# 第 7 章的 `LLM`（离线压测直接用它）、第 15 章的服务器和启动器（在线压测量的就是它，每个开关都是它的一个命令行旗标）、第 11 章的基准测试（HF 那一侧照它的写法）。本章新建 `minisgl/benchmark/`：负载、离线压测、在线客户端、起服务器的小工具，以及命令行 `python -m minisgl.benchmark`；`examples/` 里多了本章的 main 和消融脚本。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch21_benchmark.py`：离线压测 8 个随机请求；再起一个真的服务器，让 8 个请求按每秒 4 个的泊松过程到达，逐个打印 TTFT、TPOT，最后是 P50 / P99 和吞吐。`python tools/steps.py check 21` 会跑它和本章的测试。消融和同行对比要跑四十分钟上下，在单独的脚本里：
#
# ```bash
# python tools/steps.py run 21 -- python examples/ch21_benchmark.py
# python tools/steps.py run 21 -- python examples/ch21_ablation.py          # 消融表 + 同行，2 核上四十分钟上下
# python tools/steps.py run 21 -- python -m minisgl.benchmark --help        # 对任何一个在跑的服务器压测
# ```
#
# ![上：在线压测的时间线——请求按泊松过程到达、在到达时刻发出；TTFT 是第一段文字到达减去发出，ITL 是相邻两段的间隔，TPOT 是第一段到最后一段除以 token 数减一，吞吐是全部输出 token 除以整段时间。下：消融——同一轮的同一份请求发给每个配置各自的服务器，每个配置只比全开改一个开关，文字逐字和全开比，指标取各轮中位数](../assets/ch21_bench.svg)
#
# ## 负载：同一个种子，同一份活
#
# 压测的第一件事是让两次运行做同样的活。`random_workload` 照 nano-vllm 的 `bench.py` 的做法：N 个请求，提示长度和输出长度各在一个区间里均匀地抽，token 是随机 id，种子固定。每个请求都 `ignore_eos`：生成的 token 数正好是 `max_tokens`，不看模型什么时候想停，两种配置算的 token 一样多。

# %% tags=["remove-input"]
listing("minisgl/benchmark/workload.py", "random_workload")

# %% [markdown]
# 随机 id 有一个后果：提示之间没有公共前缀，前缀缓存（第 9 章）无事可做。真实的聊天服务里每个请求都以同一段系统提示开头，所以 `shared_prefix` 给每个提示接上同一段前缀；`shared_prefix=0`（默认）时不多抽一个随机数，同一个种子得到的负载和不用这个参数时完全一样。
#
# ## 离线：一次交出全部请求
#
# 离线压测量的是吞吐：整批交给 `LLM.generate`，从交出到全部生成完。nano-vllm 报的“tok/s”就是这里的 `output_throughput`——只数生成的 token，提示不算：

# %% tags=["remove-input"]
listing("minisgl/benchmark/offline.py", "run_offline")

# %% [markdown]
# ## 在线：按泊松过程到达，记下每一段的时刻
#
# 离线的数回答“这台机器一秒最多能生成多少 token”，回答不了“用户等多久”。在线压测对着真的服务器发请求。请求什么时候来，决定了服务器看到的批：`poisson_arrivals` 让相邻两个请求的间隔服从均值 1/rate 的指数分布，`rate=inf` 时全部在 0 秒到达：

# %% tags=["remove-input"]
listing("minisgl/benchmark/client.py", "poisson_arrivals")

# %% [markdown]
# 每个请求一个协程：睡到自己的到达时刻，发出流式的 `/v1/completions`（温度 0、`ignore_eos`、要 `usage`），每收到一段带文字的 SSE 事件就记一个时刻。每个请求一条连接：连接池要是比请求少，后到的请求会排在客户端里，量出的 TTFT 就混进了客户端自己的排队：

# %% tags=["remove-input"]
listing("minisgl/benchmark/client.py", "_one")

# %% [markdown]
# 三个延迟指标都从这些时刻算出来（上图）：
#
# - **TTFT** = 第一段到达 − 发出：排队 + prefill + 第一步采样，用户多久看到第一个字；
# - **ITL** = 相邻两段的间隔，每个请求有“段数 − 1”个：一步 prefill 插进来时，正在 decode 的请求的这一次间隔就长；
# - **TPOT** = (最后一段 − 第一段) / (输出 token 数 − 1)：一个请求的平均速度。token 数从服务器的 `usage` 读，不数段数——第 13 章的增量反分词会把半个字扣住，凑齐了和下一个 token 一起发，一段里就有两个 token。
#
# 每个指标报 P50 和 P99，不报平均数：平均数被少数极慢的请求拉高，又把它们藏起来；延迟目标一般按 P99 定。百分位照 numpy 的默认做法插值：

# %% tags=["remove-input"]
listing("minisgl/benchmark/client.py", "percentile")

# %% [markdown]
# ??? note "深入：汇总、起服务器、命令行"
#
#     `summarize` 把一次压测汇总成一个字典，消融表的每一行就是几个这样的字典取中位数。`launch_server` 在一个空闲端口上起 `python -m minisgl`，等 `/v1/models` 能访问才交出地址；服务器在启动时就退出（比如模型路径写错），错误里带着它日志的末尾，不会干等到超时。命令行 `python -m minisgl.benchmark` 对任何一个在跑的服务器压测：它用模型目录里的分词器把随机 id 变成文字（服务器收的是文字），提示的 token 数从 `usage` 读。

# %% tags=["remove-input", "fold"]
listing("minisgl/benchmark/client.py", "summarize")

# %% tags=["remove-input", "fold"]
listing("minisgl/benchmark/server.py", "launch_server")

# %% [markdown]
# ## 运行

# %%
# NBVAL_IGNORE_OUTPUT
run("python examples/ch21_benchmark.py")

# %% tags=["remove-cell"]
# 下面几段话引用的事实，就是上面这次运行打印的（时间每次都变，token 数不变）
main_out = output_of("python examples/ch21_benchmark.py")
for expected in ("离线：8 个请求，提示共 349 个 token，生成 190 个", "在线：8 个请求，平均每秒到达 4 个", "个 token 用时"):
    assert expected in main_out, expected

# %% [markdown]
# 离线那一行是 8 个请求一起算完的吞吐。在线的 8 个请求陆续到达：新请求一到，调度器先给它单独跑一步 prefill（prefill 优先；提示都不到 70 个 token，没有分块），正在 decode 的请求都多等这一步，所以中间到的请求 3～6 赶上别人正忙，TTFT 最长。请求 1 生成 17 个 token，却只收到 15 段：第 13 章的增量反分词把半个字扣住，凑齐了和下一个 token 一起发，所以 TPOT 除以的是 token 数减一，不是段数减一。同一份请求、同样的 token 数，时间每次运行都不一样——这是在线压测的常态，所以下面的消融每个配置跑几轮、取中位数。
#
# 把每个请求画成一条线，看得更清楚（又跑了一次，所以数和上面的不同）：

# %%
# NBVAL_SKIP
from ch21_benchmark import online_demo

requests, result = online_demo()
plt = pyplot()
fig, ax = plt.subplots(figsize=(8, 3.4))
for i, t in enumerate(result.traces):
    ax.plot([t.sent, t.chunks[0]], [i, i], ":", color="#94a3b8")
    ax.plot([t.chunks[0], t.chunks[-1]], [i, i], "-", color="#94a3b8")
    ax.plot(t.chunks[1:], [i] * (len(t.chunks) - 1), "o", ms=3, color="#1d4ed8")
    ax.plot([t.chunks[0]], [i], "o", ms=6, color="#c2410c")
    ax.plot([t.sent], [i], "|", ms=10, color="#475569")
ax.set_yticks(range(len(result.traces)), [f"请求 {i}" for i in range(len(result.traces))])
ax.invert_yaxis()
ax.set_xlabel("秒（从压测开始）：| 发出，虚线 排队 + prefill，红点 第一段文字，蓝点 之后的每一段")
plt.tight_layout()
plt.show()
print(f"（2 个线程，机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}）")

# %% [markdown]
# 请求 0 到的时候服务器空着，不到 0.2 秒就出了第一段，之后一段接一段。再看蓝点之间那些上下对齐的缺口：每个缺口的右端都正对另一行的红点——那一步是新来的请求 2～7 的 prefill，所有正在 decode 的请求都多等了这一步。ITL 的 P99 是 P50 的好几倍，说的就是这些缺口；TPOT 是平均数，看不出它们。
#
# ## 消融：一次只改一个开关
#
# 全开的配置是服务器的默认（radix 前缀缓存、每块 256 token 的分块 prefill、块间插 decode、重叠调度、paged 注意力、C++ 算子、页大小 1），再加上编译 decode（批大小 1、2、4、8、16）。每一行在它之上只改一个旗标（或一个环境变量），起一个自己的服务器。负载：16 个请求同时到达（`rate=inf`），共享一段 128 token 的系统提示，后面各自 32～256 个随机 token，各生成 32～128 个。跑 3 轮，每轮一个种子，同一轮里每个配置拿到的是同一份请求；每个服务器先发一个短请求热身（编译在启动时已经做完）。温度 0，所以每一行的文字还要和全开的逐字比一遍：一个开关要是改变了算出来的东西，这里就看得出。
#
# TP=3 那一行不编译：CPU 上本书不把 gloo 的集合通信编进图（第 18 章），所以它该和“不编译”那一行比。TP=2 不在表里：SmolLM2 的 9 个 query 头分不成两份，启动器在起任何进程之前就这样拒绝：

# %%
from ch21_ablation import tp2_error

print(tp2_error())

# %%
# NBVAL_SKIP
from ch21_ablation import ROUNDS, ROWS, ablate_rows, ablation_table

names = list(ROWS)
raw = ablate_rows(names[:4])  # 一个单元不超过 20 分钟：11 行分三个单元跑

# %%
# NBVAL_SKIP
raw |= ablate_rows(names[4:8])

# %%
# NBVAL_SKIP
raw |= ablate_rows(names[8:])

# %% tags=["milestone"]
# NBVAL_SKIP
abl = ablation_table(raw)
rows = abl["rows"]
full = rows["全开"]
print(f"{'配置':<22}{'吞吐':>12}{'比全开':>8}{'TTFT P50':>11}{'TTFT P99':>11}{'TPOT P50':>10}{'ITL P99':>10}  文字与全开相同")
for name, r in rows.items():
    print(f"{name:<22}{r['throughput']:7.1f} token/s{r['throughput'] / full['throughput']:7.2f}×"
          f"{r['ttft_p50_ms']:8.0f} ms{r['ttft_p99_ms']:8.0f} ms{r['tpot_p50_ms']:7.1f} ms{r['itl_p99_ms']:7.0f} ms"
          f"  {r['same_text']}/{r['requests']}")
print(f"（每轮 {full['output_tokens']} 个输出 token，{ROUNDS} 轮取中位数；2 个线程，机器的 1 分钟平均负载 {abl['load']:.1f}）")

# %%
# NBVAL_SKIP
plt = pyplot()
names = [n for n in rows if n != "全开"]
fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
axes[0].barh(names, [rows[n]["throughput"] / full["throughput"] for n in names], color="#60a5fa")
axes[0].axvline(1.0, color="#1e293b", lw=1)
axes[0].set_xlabel("吞吐 ÷ 全开的吞吐（越大越好）")
axes[1].barh(names, [rows[n]["ttft_p99_ms"] / full["ttft_p99_ms"] for n in names], color="#fb923c")
axes[1].axvline(1.0, color="#1e293b", lw=1)
axes[1].set_xlabel("TTFT P99 ÷ 全开的（越小越好）")
axes[0].invert_yaxis()
plt.tight_layout()
plt.show()

# %% [markdown]
# 11 行、每行 48 个请求，除了 int4，每一行的文字都和全开的逐字相同：这些开关只改变怎么算，不改变算出什么。逐行看（比值都是吞吐对全开）：
#
# - **前缀缓存 naive：0.82×，TTFT P99 从 3914 ms 涨到 6701 ms。** 每个请求都要把 128 token 的系统提示再算一遍。全开时每步最多算 256 个提示 token，16 个请求的 prefill 要分十几步；同一步里一起算的那一两个请求彼此用不上前缀（练习 65 数的就是这个），后面几步的请求都命中。
# - **prefill 不分块：1.01×，ITL P99 从 464 ms 降到 195 ms，TTFT P50 却从 2133 ms 涨到 2973 ms。** 一步的预算 8192 够把 16 个提示一次算完，然后一起 decode，decode 不再被 prefill 打断；分块时每步最多 256 个提示 token、块间插 decode，先算完的请求先出字，代价是 ITL 和 TTFT 的尾巴。这一行还说明前缀缓存的账要连着分块看：一步里一起算的提示谁也用不上谁的前缀，这一行的命中比全开少得多（TTFT 的 P50 和 P99 几乎相同：大多数请求在同一步里算完 prefill），吞吐却和全开持平：多算的提示和一次算完省下的十几步大致抵消。
# - **注意力全用 SDPA：0.10×，TPOT 1431 ms。** 不是 SDPA 本身慢，是它和编译一起用时按页表的宽度算注意力（第 18 章的折叠框）：SmolLM2 的页表一行 8192 个位置，编译好的每一步都对 8192 个 key 做注意力，不管请求实际多长。CPU 上的默认（prefill 用 SDPA、decode 用 paged）没有这个浪费。
# - **int4 权重：1.48×，TPOT P50 从 108.9 ms 降到 75.2 ms，文字只有 29/48 相同。** 每步读的权重字节是 float32 的六分之一，decode 和 prefill 都走第 19 章的整数点积（折叠框）；量化改了算出来的数，文字不同是预料之中的。
#
# 另外五行都在噪声之内，或者是为 GPU、为批大小 1 设计的，逐行的解释在下面的折叠框里。
#
# ??? note "深入：int4 为什么在大批时也快，另外五行"
#
#     - **int4 权重：1.48×。** 第 19 章的 int4 算子不限行数：十几行的 decode、几百行的 prefill 都走整数点积，每趟 8 行，一块权重只从内存读一遍（第 19 章运行一节的第二段：16 行时线性层快 4 倍多）。一步里不随权重变小的那些（注意力、采样、调度）没变，所以整体是 1.48×。它的精度代价第 19 章量过。
#
#     - **块间不插 decode：0.97×；不重叠调度：0.98×。** 都在噪声之内，原因见下面的折叠框。
#
#     - **不编译：1.00×。** 编译在这份负载上没有带来好处：第 18 章量的一步 decode，编译只快 6%～9%（那时还没有 C++ 算子）；这里大多数步是十几行一起 decode，一步的时间几乎全在矩阵乘里，编译省下的分派开销显不出来。
#
#     - **TP=3、不编译：0.35×（对“不编译”那一行也是 0.35×）。** 每个 rank 一个线程，三个线程分两个核，每步还有 gloo 通信。
#
#     - **torch 算子：0.93×。** 第 19 章的 float32 GEMV 只管不超过 8 行的线性层，批大小 1 才是它的主场；这里大多数步是十几个请求一起 decode，走的本来就是 torch 的矩阵乘。差的 7% 在 3 轮的噪声边上，剩下的 C++ 算子（融合的残差 + RMSNorm、写 KV）和收尾时不到 8 行的那些步能解释一部分，本页没有单独量。
#
#     - **页大小 16：0.98×**，在噪声之内：paged 后端逐个槽位读，页大小只改变前缀缓存按多大的块命中。
#
# 所以在这台机器、这份突发的负载上，不改输出的开关里值钱的是前缀缓存，和“别在 decode 的时候用按页表宽度算的 SDPA”；int4 权重快得最多，代价是输出变了；服务器默认的分块（每步 256 个 token）让一半的请求更早出首字（TTFT P50 2133 对 2973 ms），代价是 ITL 和 TTFT 的尾巴；其余几项要么在噪声之内，要么是为 GPU 或批大小 1 设计的。
#
# ??? note "深入：这台 CPU 量得出什么，量不出什么"
#
#     这张表是 2 个 CPU 核、SmolLM2（135M，float32）、16 个同时到达的请求的结果。几项优化在 GPU 上的意义，这里显不出来：
#
#     - **重叠调度**：GPU 上调度器的 Python 工作（拼下一批、处理上一批）藏在 GPU 算前向的时间里；这里前向也在 CPU 上，工作线程和调度器线程抢同样两个核，能藏起来的只有调度器自己那一点。
#     - **编译**：GPU 上 CUDA 图省的是每步几千次 kernel 启动；这里 `torch.compile` 省的是逐个算子的 Python 分派。结构一样，省的东西不一样：批一大，分派的开销在一步里占比变小，省下的也就不剩多少。
#     - **TP**：GPU 上 TP 把每步要读的权重分给几块卡，decode 受带宽限制，接近按卡数变快；这里三个 rank 分两个核，再加每步的 gloo 通信，只会更慢。它在这张表里是代价，不是收益。
#     - **注意力后端**：这份负载的上下文最长五百多个 token（提示的随机 id 解码成文字、服务器再分词，token 数会变一点），paged 后端省下的拷贝不多（第 17 章里大批、长上下文时差距才大）；GPU 上的 FlashInfer、FA3 是另一回事。
#     - **块间插 decode、分块**：它们最该保护的是陆续到达时正在 decode 的请求；16 个请求同时到时，它们只是把十几步 prefill 和 decode 交错起来。
#
#     量得出的是 CPU 上同样成立的几项：前缀缓存省下的 prefill、SDPA 按页表宽度算的浪费、int4 少读的字节。每一行只跑了 3 轮，吞吐相差 5% 以内的行分不出先后。
#
# ## 同行：一次 decode 十几个请求，是 HF 的 1.86 倍
#
# 同行没有我们的服务器，所以这一节离线地比：同一份 token id 的负载（和消融同样的三个种子），我们的 `LLM.generate` 用离线的默认（一步 prefill 预算 8192、不插 decode）加上编译；HF 照第 11 章的写法，每 16 个一批、左填充、每批生成到这批最长的 `max_tokens`；llama.cpp 用 llama-cpp-python 的 F32 文件（和我们同一组 float32 权重；和第 19 章一样从源码编，装了才比），它的高层接口一次只跑一个请求，所以是一个接一个地跑。吞吐都按“每个请求要的 token 数之和 ÷ 墙钟时间”算，三个参赛者轮流跑、取中位数：

# %% tags=["milestone"]
# NBVAL_SKIP
from ch21_ablation import OURS, peers

peer = peers()
ours = peer["rates"][OURS]
for name, rate in peer["rates"].items():
    same = peer["same_as_ours"].get(name)
    agree = f"  与我们的 token 整段相同的请求 {same}/{peer['requests']}" if same is not None else ""
    print(f"{name:<28}{rate:7.1f} token/s  我们是它的 {ours / rate:4.2f} 倍{agree}")
if peer["llamacpp"]:
    print(f"llama.cpp：{peer['llamacpp']}")
print(f"（2 个线程，机器的 1 分钟平均负载 {peer['load']:.1f}）")

# %% [markdown]
# 同一份 token，我们的吞吐是 HF 的 1.86 倍，是一次一个请求的 llama.cpp F32 的 4.37 倍。HF 和 llama.cpp F32 生成的 token 和我们的整段相同（48/48）：同一组 float32 权重，贪心的结果一样。这个比法对 llama.cpp 不公平：它的高层接口不批处理，我们一次 decode 十几个请求；它的服务器（`llama-server`）有连续批处理，本书没有比它；Q4_1 也不在这里比（折叠框）。和 HF 的比值与第 11 章的基准同一量级（混合负载、同时最多 16、64 个请求：第 11 章 1.46、1.74 倍，第 19 章末尾重跑 1.96、2.25 倍）。
#
# ??? note "深入：为什么不比 llama.cpp 的 Q4_1"
#
#     在跑这一页的机器上（带 AVX-512 的 Xeon），llama-cpp-python 0.3.36 的 Q4_1 一次喂多于一个提示 token 就段错误，只能逐个 token 喂。这份负载的提示有几百个 token，逐个喂占了它大半时间，量出来的吞吐说明不了 Q4_1；它的 decode（本来就一次一个 token）第 19 章比过。
#
# 作为尺度（不是我们的数）：nano-vllm 在一块 RTX 4070 笔记本 GPU 上跑它的 `bench.py`（Qwen3-0.6B，256 个请求，输入、输出各 100～1024 个 token）报 1434 tok/s；上游 mini-sglang 的 README 用同样的负载在一块 H200 上跑 Qwen3-0.6B 和 Qwen3-14B，在线的对比是在四块 H200 上回放 Qwen 的真实请求轨迹、和 SGLang 比。我们的请求数是它的 1/16、模型约是它的 1/4，跑在两个 CPU 核上：这几个数放在一起只说明量级，说明不了谁的实现更好。
#
# ## 与上游的差异
#
# 上游以固定的提交 20fcd7f 为准。
#
# - 我们的 token 数从 `usage` 读，TPOT、ITL 分开报；上游的在线客户端把每个 SSE 事件都当成一个 token（连发出的时刻和最后那个只带 `finish_reason` 的事件，每个请求多算两个），报的 TPOT 其实是相邻事件的间隔，也就是 ITL。`python/minisgl/benchmark/client.py` · `process_benchmark_results`
# - 我们的百分位照 numpy 插值，上游取 `times[int(n × 0.99)]`：n 小于 100 时 P99 就是最大值（main 那次运行的 8 个 TTFT：按上游的取法是最大值 245.1 ms，我们插值得 243.6 ms）。
# - 我们不凑提示的长度，上游把随机 id 解码、再编码，长了截、短了补，凑出正好 n 个 token（最多试 64 次）。`python/minisgl/benchmark/client.py` · `generate_prompt`
# - 我们的消融和同行在同一次运行里、温度 0、逐字比输出；上游的离线 `benchmark/offline/bench.py` 用 `temperature=0.6`，没有同一次运行里的对照。
#
# ??? note "深入：上游压测的另外两处不同"
#
#     上游发的是 `/v1/chat/completions`（套聊天模板，提示又多出几个 token），用官方的 `openai` 异步客户端；我们发 `/v1/completions`、用 httpx，每个请求一条连接。上游的在线压测按真实请求轨迹（Qwen 的 trace）回放，我们用泊松过程：轨迹更真实，但要下载数据集；泊松过程只要一个种子。
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 在线客户端：`python/minisgl/benchmark/client.py` · `benchmark_one`（第 202～248 行）、`python/minisgl/benchmark/client.py` · `benchmark_trace`（第 287～309 行）
# - 汇总：`python/minisgl/benchmark/client.py` · `process_benchmark_results`（第 320～404 行）
# - 提示：`python/minisgl/benchmark/client.py` · `generate_prompt`（第 183～199 行）
#
# ## 测试
#
# 本章的测试在 `tests/test_ch21_benchmark.py`：
#
# - 负载：同一个种子得到同一批请求，长度都在范围里，共享前缀真的共享；坏参数是中文错误；
# - 指标：泊松到达的间隔均值和标准差都接近 1/rate；百分位在 200 组随机的数上与 numpy 相同；TTFT、TPOT、ITL 按定义从时刻算出；
# - 离线：每个请求正好生成 `max_tokens` 个，一批生成和一个一个地生成结果相同；
# - 在线：对真的服务器（`rate=inf` 和每秒 8 个），每个请求的 token 数、发出时刻都对得上，流式拼起来的文字就是非流式的回答，在一个正在跑的事件循环里也能用；命令行能跑、坏参数是一行中文；服务器起不来时错误带着它的日志。

# %% tags=["remove-input"]
listing("tests/test_ch21_benchmark.py", "test_run_online_against_a_real_server")

# %%
run("python -m pytest -q --color=no tests/test_ch21_benchmark.py")

# %% [markdown]
# ## 怎么讲清楚
#
# 压测先定三件事：活是什么（请求的长度分布、有没有公共前缀、种子固定）、请求怎么来（一次全来量吞吐，泊松到达量延迟）、量什么（吞吐数生成的 token；TTFT、TPOT、ITL 报 P50 和 P99，token 数从服务器的 usage 读，不数 SSE 事件）。消融是一次只改一个开关、同一份负载、同一次运行、几轮取中位数，还要确认每个开关没改变算出来的东西（温度 0 的文字逐字相同）。举一个数：16 个请求共享 128 token 的系统提示时，关掉前缀缓存吞吐降到 0.82×、TTFT P99 涨七成。最后要说清楚这些数只对这台机器、这份负载成立：在两个 CPU 核上，TP 和重叠调度这类为 GPU 设计的优化显不出它们在 GPU 上的收益，表里如实写它们的代价。

# %% [markdown]
# ## 练习
#
# 1. **负载的形状**。把消融的负载改成不共享前缀（`shared_prefix=0`），只跑“全开”和“前缀缓存 naive”两行。差距变成多少？为什么？
# 2. **延迟和负载**。用 `python -m minisgl.benchmark` 对同一个服务器在 rate = 1、2、4、inf 下各压一次，画出 TTFT P99 和吞吐随 rate 的变化。从哪个 rate 起 TTFT 开始陡升？那时的吞吐和 `rate=inf` 的比怎样？
# 3. **挑战：goodput**。（命令行只打印汇总，要逐个请求的 TTFT、TPOT，在 Python 里调 `run_online`。）只数“TTFT ≤ 1 秒且 TPOT ≤ 100 毫秒”的请求，吞吐（goodput）随块大小（`--max-prefill-length` 64、256、1024）怎么变？块大小在这里是在 TTFT 和 TPOT 之间做什么取舍？
#
# ??? success "参考答案"
#
#     1. 不共享前缀时 radix 一个 token 也命不中，两行的差只剩 radix 树本身的开销（插入、匹配），在噪声之内；共享前缀时 radix 每轮最多省下 15 × 128 个提示 token 的 prefill，实际略少：同一步 prefill 里一起算的请求互相用不上（练习 65）。
#     2. rate 小时服务器大部分时间空闲，TTFT 约等于单独一个请求的 prefill；rate 接近服务器的吞吐（每秒能完成几个请求）时请求开始排队，TTFT 陡升，吞吐接近 `rate=inf` 的值。陡升的位置就是这台机器在这份负载下的容量。
#     3. 块小：每步的 prefill 短，正在 decode 的请求等得少（TPOT、ITL 好），但长提示要很多步才算完（TTFT 差）；块大反之。goodput 的峰值在两个约束刚好都满足的块大小上；练习 66 写的就是 goodput 和最大 rate 的算法。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 63   # 把第 63 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 63    # 判题
# python practice/judge.py hint 63    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - 压测先固定活：随机长度、随机 id、固定种子、`ignore_eos`；要前缀缓存有事可做，就给提示接上共享的系统提示。
# - 离线压测量吞吐；在线压测让请求按泊松过程到达，记下每一段文字的时刻，算 TTFT、TPOT、ITL 的 P50 和 P99，token 数从 `usage` 读。
# - 消融一次只改一个开关，同一份负载、同一次运行、几轮取中位数，还要确认输出没变。
# - 在这台 2 核的 CPU 上，不改输出的开关里前缀缓存最值钱，编译后的 decode 别用按页表宽度算的 SDPA；int4 权重吞吐 1.48×，输出随之改变；TP、重叠、编译是为 GPU 设计的，这里显不出收益，表里如实写它们的代价。
