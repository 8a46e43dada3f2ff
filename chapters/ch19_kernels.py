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
# # 第 19 章 自定义算子
#
# 第 18 章把 decode 编译之后只快了不到一成：批大小 1 时一步的大半时间花在 121 个线性层上，编译动不了它们。它们对每个权重只做一次乘加，时间全花在把权重从内存读进来，而 torch 的 `F.linear` 在这种形状下常常用不满内存带宽（随机器而变）。于是我们自己写一个 C++ 算子（[GEMV](../glossary.md#gemv)），每个权重只读一遍、按带宽的速度读；再按组量化成 int8、int4，让要读的字节变少；调用最多的 RMSNorm 和写 KV 池也各写成一个 C++ 算子。本章也讲清第 17 章起就在用的那套机制：C++ 源码怎么编译、缓存、用 [TORCH_LIBRARY](../glossary.md#torch-library) 登记成 `torch.ops.minisgl.*`，假实现为什么能让 `torch.compile` 把它留在图里。本章的运行、测试证明：用 C++ 算子的引擎与 Hugging Face 逐 token 相同；量化后的引擎在真实的生成里，每一层算的都正是“取整的 x 乘取整的 W”。

# %% tags=["remove-cell"]
from textwrap import indent

from IPython.display import Markdown

from minibook.page import *
setup(19)

import os
import sys

sys.path.insert(0, "examples")  # 测量的函数在 examples/ch19_bench.py 里


def in_fold(md) -> Markdown:
    """缩进 4 格：接在上一个 markdown 单元开头的 ??? 折叠框里。"""
    return Markdown(indent(md.data if isinstance(md, Markdown) else md, "    "))

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 批大小 1 时，一个 [N, K] 的 float32 线性层每从内存读 1 个字节做几次浮点运算？为什么它快不快只看内存带宽？
# 2. `TORCH_LIBRARY` 里的 `def` 和 `TORCH_LIBRARY_IMPL` 里的 `impl` 各登记什么？`torch.compile` 为什么还要一个假实现？
# 3. 同样的 C++ 源码，换一台机器为什么要重编？缓存的键里该有什么？
# 4. int4 按 32 个一组、每组一个缩放和一个最小值（都是 float16），平均每个权重占几个字节？书里内置的 SmolLM2 的权重量化成 int4，为什么一个数都不变？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 每个权重（4 字节）做一次乘加（2 次浮点运算），0.5 次每字节；一个核每秒能做几十 G 次浮点运算，却只能从内存读二三十 GB，所以算力闲着，时间 ≈ 权重字节数 ÷ 内存带宽。
#     2. `def` 登记签名（名字、参数和返回值的类型，哪个参数会被原地改写）；`impl` 给某个分派键（CPU、CUDA……）登记一份实现。`torch.compile` 追踪时不真的运行算子，只用假张量推形状：假实现告诉它输出的形状和 dtype，它就能把这个算子当成一次不透明的调用留在编译出的图里。
#     3. 我们用 `-march=native` 编，编出的库只保证能在同样指令集的 CPU 上跑；torch 的版本、Python 的版本也要对得上。键 = 源码 + 编译选项 + CPU 指令集 + torch 与 Python 的版本的摘要，任何一样变了就是另一个库。
#     4. 每组 16 字节的 4 位数 + 4 字节的缩放和最小值 = 20 字节 / 32 个 = 0.625 字节，是 float32 的 5/32，和 llama.cpp 的 Q4_1 一样。SmolLM2 的权重是从 Q4_1 格式的 GGUF 反量化来的：每组 32 个数本来就只取 16 种等距的值，我们的 int4 正好把它们还原回去；LM head 在那个文件里是 Q8_0，正好是我们 int8 的格点（int4 模式下 LM head 用 int8）。

# %% [markdown]
# ## 本章要回顾的文件
#
# 第 2 章的线性层（`layers/linear.py`）、第 17 章的 `kernel/__init__.py` 和 `csrc/paged_attention.cpp`（当时提前引入，本章讲）、第 18 章的 `minisgl::store_kv`。本章新建三个 C++ 文件（线性层、RMSNorm、写 KV 池）、`layers/quant.py`（量化）和 `layers/hugepages.py`（大页）；线性层、LM head、RMSNorm 能换用 C++ 算子，`kernel/__init__.py` 加假实现，Engine 和启动器加 `--cpu-kernels`、`--quantization`。`paged_attention.cpp` 重写了内层循环，第 11 章的基准多一个 `--cuda-graph-max-bs`。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch19_kernels.py`：列出登记过的算子；量 121 个线性层、RMSNorm、写 KV 池、分页注意力各要多久；量化误差；最后用 C++ GEMV、int8、int4 跑两个模型，和 HF 比。CPU 上 float32 时默认就用 C++ 算子（`cpu_kernels="auto"`）；量化用 `--quantization` 打开，`--compile-cpp-wrapper` 见后文：
#
# ```bash
# python tools/steps.py run 19 -- python examples/ch19_kernels.py
# python tools/steps.py run 19 -- python examples/ch19_bench.py      # 和 HF、llama.cpp 比 decode 速度
# python tools/steps.py run 19 -- python -m minisgl --quantization int8
# ```
#
# ![左：一个 C++ 算子从源码到 torch.ops.minisgl.*：按摘要找缓存、没有就编译、加载时登记，Python 这边再登记假实现；右：decode 的一个线性层，权重按行分给线程，每个权重只读一次，量化的权重 16 行交错、用整数点积](../assets/ch19_kernels.svg)
#
# ## 先量：F.linear 在批大小 1 时读得有多快
#
# 把 SmolLM2 一步 decode 的 121 个线性层（每层的 q/k/v 合并、gate/up 合并，和引擎里一样，再加 LM head）按批大小 1 各乘一遍，记下时间，算出每秒读了多少字节：

# %%
# NBVAL_IGNORE_OUTPUT
import torch

from ch19_kernels import section_bandwidth, smollm2_linear_weights

weights = smollm2_linear_weights()
section_bandwidth(weights)
print(f"（机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}）")

# %% [markdown]
# 这一次 `F.linear` 读到 20 GB/s，C++ 的大页版 23 GB/s；int8、int4 要读的字节只有 float32 的 27%、18%，时间缩到 6.7、4.9 ms。
#
# ??? note "深入：`F.linear` 这一行为什么不稳"
#
#     这一格紧跟在第一次编译 C++ 算子之后量，机器还没闲下来（负载 1.3）。同一次执行里，后面“运行”一节的 main 在一个新进程里量同一件事，`F.linear` 24 GB/s，C++ 的大页版 28 GB/s，int8、int4 5.7、3.9 ms；上一次执行这一页时，notebook 里的 `F.linear` 是 26 GB/s，再早一次只有 9.3 GB/s，写本章初稿的那台机器上一直是 11 GB/s 左右。MKL 给批大小 1 的乘法挑哪条路、权重碰巧落在什么样的页上，都随机器和进程变；C++ 的大页版每次都在这台机器读内存的带宽附近。所以本章不说“GEMV 比 F.linear 快几倍”，只说：每个权重只读一遍、提前预取、放进大页，就稳稳地贴着带宽读。

#
# ## 一个 C++ 算子怎么进 torch
#
# `minisgl/kernel/__init__.py` 的 `load_kernels` 负责把 `csrc/` 下的全部 `.cpp` 编成一个共享库并加载。库名里带一个摘要：源码、编译选项、CPU 的指令集、torch 和 Python 的版本，任何一样变了就是另一个库。
#
# ??? note "深入：`_build_key`、`load_kernels` 和 `load_or_build` 的全文"

# %% tags=["remove-input", "fold"]
listing("minisgl/kernel/__init__.py", "_build_key")

# %% tags=["remove-input", "fold"]
listing("minisgl/kernel/__init__.py", "load_kernels")

# %% tags=["remove-input", "fold"]
listing("minisgl/kernel/__init__.py", "load_or_build")

# %% [markdown]
# 缓存里有同名的库就直接 `torch.ops.load_library`，几乎不花时间；没有就交给 `torch.utils.cpp_extension.load`，它写一个 ninja 构建文件、调 g++ 编译链接，十几秒。编不出来时抛 `KernelsUnavailable`，原因写成一行；`auto` 的设置（注意力后端、线性层）据此退回 torch 的实现，并说一声。
#
# 库里没有任何 Python 绑定代码。每个 `.cpp` 文件末尾用 `TORCH_LIBRARY` 登记签名、用 `TORCH_LIBRARY_IMPL` 给 CPU 这个[分派键](../glossary.md#dispatch-key)登记实现；库一加载，这些静态对象的构造函数就跑一遍，算子出现在 `torch.ops.minisgl` 下：

# %% tags=["remove-input"]
listing("minisgl/kernel/csrc/linear.cpp", "TORCH_LIBRARY_FRAGMENT")

# %% [markdown]
# 实现登记在另一个块里，按分派键分开：

# %% tags=["remove-input"]
listing("minisgl/kernel/csrc/linear.cpp", "TORCH_LIBRARY_IMPL")

# %% [markdown]
# ??? note "深入：一个命名空间只有一处 TORCH_LIBRARY"
#
#     同一个命名空间只能有一处 `TORCH_LIBRARY`，它在第 17 章的 `paged_attention.cpp` 末尾，别的文件用 `TORCH_LIBRARY_FRAGMENT` 往里追加：

# %% tags=["remove-input", "fold"]
listing("minisgl/kernel/csrc/paged_attention.cpp", "TORCH_LIBRARY")

# %% [markdown]
# ??? note "深入：签名里的 Tensor(a!) 和 -> ()"
#
#     签名是 PyTorch 自己的 schema 语言：`Tensor(a!)` 表示这个参数会被原地改写（第 18 章的 `store_kv` 就是这样声明的），`-> ()` 表示没有返回值。
#
# 分派器按参数所在的设备挑实现：有 CPU 专用的就用它，没有再找 `CompositeExplicitAutograd` 这种“哪个设备都行”的。`store_kv` 的签名和一份 Python 实现在 `kvcache/mha_pool.py` 里登记；本章的 `store_kv.cpp` 只给 CPU 再登记一份 C++ 实现。问分派器每个键此刻登记的是谁：

# %%
from minisgl.kernel import load_kernels

load_kernels()
import re

table = torch._C._dispatch_dump_table("minisgl::store_kv")  # 每个分派键此刻登记的是哪份实现
for line in table.splitlines():
    if line.startswith(("CPU:", "CUDA:", "Meta:")):  # 路径只留 minisgl/、torch/ 以下的部分
        print(re.sub(r"registered at \S*?/((minisgl|torch)/\S+)", r"登记于 \1", line))

# %% [markdown]
# CPU 是 C++ 的那份；CUDA 等其余的设备落到 `mha_pool.py` 里登记的 Python 实现（`CompositeExplicitAutograd` 替它们都填上了）；`Meta` 是假张量用的，下面说。
#
# `torch.compile` 追踪时不运行算子，而是用只有形状、没有数据的假张量走一遍。C++ 实现读不了假张量，所以每个算子还要一个假实现，只算输出的形状和 dtype：

# %% tags=["remove-input"]
listing("minisgl/kernel/__init__.py", "_register_fakes")

# %% [markdown]
# 有了它，编译出的代码里这些算子就是一次普通的调用，不打断图（第 18 章的 `fullgraph=True` 要整步 decode 是一张图）。测试用 int4 权重编译 decode：编译次数不多不少，token 与不编译相同。

# %% [markdown]
# ## 小批量线性层：每个权重只读一次
#
# `csrc/linear.cpp` 的 float32 算子：权重按行分给线程，x 的行数 M 是模板参数，累加器留在寄存器里，一行做完才横向求和一次；读到第 k 个数时先[预取](../glossary.md#prefetch) 2 KB 之后的那段：

# %% tags=["remove-input"]
listing("minisgl/kernel/csrc/linear.cpp", "gemv_f32_rows")

# %% [markdown]
# 量化的两个算子把 x 也按 32 个一组取整成 int8，一组的点积就全是整数乘加。权重排成“16 行交错”的块：一个 512 位寄存器装 16 行各 4 个相邻的数，`vpdpbusd` 一条指令让 16 行各前进 4 个数，累加器的 16 个数就是 16 个输出。int4 的一块：

# %% tags=["remove-input"]
listing("minisgl/kernel/csrc/linear.cpp", "int4_block")

# %% [markdown]
# ??? note "深入：为什么要交错 16 行"
#
#     块在内存里是连续的，16 行的缩放跟在权重后面，整层只有一条从头读到尾的字节流。按行存时，一行的一组 32 个数点积完，要先转成 float、乘这一组的缩放，一行做完还要横向求和：每 64 个 int4 权重要 9 条向量指令，整数乘加只占 2 条。交错之后，每 512 个权重（16 行 × 一组）只有 8 条 `vpdpbusd`、4 次解包、1 次转换和 2 次乘加。本页之外另量的（这台机器，1 个线程，权重在大页上）：同样的 120 个 int4 层，按行存的版本（上一稿）9.4 ms，交错的版本 3.6 ms；权重反复读同一小块、全在缓存里时，每 64 个权重要 6.4 个时钟周期对 2.2 个——按行存的版本慢在指令，不在内存。缩放和最小值也从 float32 改成了 float16（和 GGUF 一样），int4 每个权重平均 0.625 字节，和 Q4_1 一样多。float32 的软件预取同样是另量的：121 个层 42 ms 变成 33 ms。`quant.py` 的 `interleave_int4` 把 `quantize_int4` 的结果排成这样的块，`deinterleave_int4` 排回去（测试检查两者互逆、格子里正是那一行的那 4 个数）。

# %% tags=["remove-input", "fold"]
listing("minisgl/layers/quant.py", "interleave_int4")

# %% [markdown]
# ??? note "深入：x 怎么量化，int8 的乘数为什么要异或 0x80"
#
#     `QuantizedX` 给 x 的每组算 dx = 最大绝对值 / 127、xq = round(x / dx)，顺便记下 Σ xq：int4 的最小值那一项是 m·dx·Σ xq，不用再逐个乘。`vpdpbusd` 要一个无符号、一个有符号的乘数；int8 的权重有正有负，异或 0x80 就变成 q + 128 ∈ [1, 255]，多算的 128·Σ xq 是整数，累加器从 −128·Σ xq 开始就抵掉了（练习 3）。没有 AVX-512 VNNI、只有 AVX2 的机器（多数笔记本）用 `vpmaddubsw` 把两对 u8 × s8 加成 int16、再用 `vpmaddwd` 加成 int32，拼出同样的 4 对乘加；int16 会饱和，所以 int8 改用 |q| 乘“带上 q 的符号的 x”，也就不要 +128 的修正。本页之外另量的（这台机器上关掉 VNNI 另编一份，1 个线程，一层 1536×576）：int4 批大小 1 时 0.030 对 0.039 ms（都在读内存），16 行时 0.23 对 0.15 ms，仍比 float32 的 GEMM（0.65 ms）快。连 AVX2 也没有（比如 ARM）才走普通的整数循环，读同样的块，1 行时 0.29 ms，16 行时 4.3 ms，比 GEMM 慢得多。三条路只差浮点的舍入，测试把后两条各另编一份（`-mno-avx512vnni`、再加 `-mno-avx2`），与同一个参照比。量化的线性层因此算的是 round(x) @ round(W).T，x 有几行都一样。行多时每 8 行一趟：第一趟把一块 16 行的权重读进 L1，之后几趟都从 L1 读，整层仍只从内存读一遍。

# %% tags=["remove-input", "fold"]
listing("minisgl/kernel/csrc/linear.cpp", "QuantizedX")

# %% [markdown]
# x 超过 8 行（prefill、大批 decode）是算力活：`linear_f32` 只接 1～8 行，多的交给 torch 的 GEMM；量化的不限行数（练习 2）。
#
# ## 大页：让一遍读得更快
#
# 每一步 decode 把 538 MB 的权重从头读到尾。CPU 按页翻译地址，结果缓存在只有几千项的 TLB 里：4 KB 的页要翻译 13 万次，2 MB 的大页只要 270 次。Engine 用 C++ 算子时，`layers/hugepages.py` 把全部权重拷进一块大页内存。
#
# ??? note "深入：透明大页，`copy_to_huge_pages` 的全文"
#
#     Linux 的透明大页（THP）在 `/sys/kernel/mm/transparent_hugepage/enabled` 是 `madvise` 时，只给 `madvise(MADV_HUGEPAGE)` 过的私有匿名内存用大页。torch 的分配器不做这件事，所以我们自己 `mmap` 一块（必须是私有的：共享的匿名内存走另一个开关）、在第一次写之前 `madvise`，把权重依次拷进去，再换掉模型里的引用（`move_weights_to_huge_pages` 做这一步；LM head 和词嵌入共用的那块只拷一份）。系统不给大页时一切照旧，只是慢一点。

# %% tags=["remove-input", "fold"]
listing("minisgl/layers/hugepages.py", "copy_to_huge_pages")

# %% [markdown]
# ## RMSNorm 和写 KV 池：一趟做完
#
# 线性层以外，SmolLM2 的一步 decode 还有 61 次 RMSNorm 和 30 次写 KV 池。它们搬的字节很少，慢在调用次数：torch 写法的一次“残差相加 + RMSNorm”是加法、平方、求均值、加 eps、rsqrt、两次乘法这七个 aten 算子，每个都要分派、分配输出、把整行读写一遍。`csrc/rms_norm.cpp` 每行只走一趟：先写出 s = x + residual（下一层的残差），顺手累加 s²，再写归一化的结果：

# %% tags=["remove-input"]
listing("minisgl/kernel/csrc/rms_norm.cpp", "norm_row")

# %% tags=["remove-input"]
listing("minisgl/kernel/csrc/rms_norm.cpp", "add_rms_norm")

# %% [markdown]
# ??? note "深入：层这边的开关，`RMSNormFused` 怎么在 C++ 和 torch 之间选"
#
#     层这边只多一个开关：Engine 选了 `cpp` 就调 `use_cpp_norms`，把模型里每个 `RMSNorm`（连同 Qwen3 每个头上的 `q_norm`、`k_norm`）的 `_cpp` 打开。

# %% tags=["remove-input", "fold"]
listing("minisgl/layers/norm.py", "RMSNormFused")

# %% [markdown]
# 写 KV 池的 `store_kv.cpp` 更简单：第 i 个 token 的 K、V 各是连续的一块，检查槽位不越界后整块 `memcpy` 到第 `out_loc[i]` 个槽位。两个算子和它们换掉的 torch 写法比（两个线程，每次 200 次调用取平均，7 次取中位数）：

# %%
# NBVAL_IGNORE_OUTPUT
from ch19_kernels import section_small_ops

section_small_ops()

# %% [markdown]
# 批大小 1 时，一次残差相加 + RMSNorm 从 22.4 µs 降到 3.3 µs，一步 61 次省下约 1.2 ms；`store_kv` 从 8.6 µs 降到 4.3 µs，一步省约 0.13 ms。合起来约是两个线程时一步 decode（约 27 ms）的 5%。和 torch 写法差 1e-6 上下，贪心结果照样与 HF 相同。
#
# ??? note "深入：小算子为什么不和带宽比"
#
#     一行 576 个数在 3 µs 里只合 3.5 GB/s，离内存带宽远得很：时间花在调用本身（从 Python 进分派器、分配两块输出、进出线程池），这种小算子要比的是调用的次数，不是字节。32 行时 C++ 版有 33 GB/s，比从内存读权重（大页上 23 GB/s）还快，因为这点数据全在缓存里。编译过的 decode（第 18 章）里，inductor 本来就会把 torch 写法的 RMSNorm 融合成一个循环，C++ 版省下的更少。
#
# ??? note "深入：GPU 版本"
#
#     `kernel/cuda/kernels.cu` 给 `rms_norm`、`add_rms_norm`、`store_kv` 在 CUDA 这个分派键上各登记一份实现，签名和 CPU 版共用：RMSNorm 一行一个线程块，各线程累加自己那几列的平方（半精度的输入也用 float 累加），warp 内用 `__shfl_xor_sync` 求和、各 warp 的部分和经共享内存再加一次；`store_kv` 一个 token 一个线程块，整行按字节拷进槽位，槽位越界是设备端断言。线性层在 GPU 上仍交给 cuBLAS（上游也是），量化在 GPU 上直接报错：本章的 GEMV 和量化是为 CPU 的内存带宽写的。这份源码只在有 GPU 的机器上由 `load_cuda_kernels()` 用 nvcc 编译、缓存，`examples/gpu_smoke.py` 第 8 节确认分派器用的是它，并和 torch 写法比结果（float32、bfloat16）。写这一章的机器没有 GPU：这个文件在这里只用 nvcc 编译通过，还没有在卡上跑过。
#
# ## 分页注意力：把 K、V 读得更快
#
# 批大时 decode 的第二大头是注意力。第 17 章的 `paged_attention` 省掉了拷贝，但读得不快；本章改了三处：head_dim 作为模板参数，点积和累加展开成固定的向量指令；按页表提前 8 个 key [预取](../glossary.md#prefetch)；草稿纸每次调用只分配一次。
#
# ??? note "深入：第 17 章的版本慢在哪里"
#
#     - **head_dim 是运行时的数。** 每个点积是一个长度未知的循环，编译器只能生成带余数处理的通用向量循环，每次还要算循环的边界。
#     - **槽位是散的。** 池子用久了，一个请求的 key 在池子里东一个西一个；硬件预取器按地址的规律猜下一行，猜不中，每个 key 都要等一次内存。批 16、上下文 256 时一层要读 6.3 MB 的 K、V，三十层近 190 MB，和权重的三分之一一样多。
#     - **草稿纸一次次地分配。** 每个（token, KV 头）都新分配一遍分数和累加器。
#
# ??? note "源码：重写后的 `attend_one`"

# %% tags=["remove-input", "fold"]
listing("minisgl/kernel/csrc/paged_attention.cpp", "attend_one")

# %% [markdown]
# 一层的测量，和参考后端（拷出来再 SDPA）比：
#
# ??? example "测量"

# %% tags=["fold"]
# NBVAL_IGNORE_OUTPUT
from ch19_kernels import section_paged_attention

section_paged_attention()

# %% [markdown]
# paged 读到 17–18 GB/s，是读内存带宽（20.7 GB/s）的八九成，比拷出来再 SDPA 快 4–5 倍。
#
# ??? note "深入：和第 17 章的版本比"
#
#     本页之外另量的：把第 17 章的 `paged_attention.cpp` 另编一份、登记在别的名字下，和本章的版本在同一个进程里轮流跑（SmolLM2 的头，槽位打散，9 次取中位数，两轮取快的那次）。1 个线程：批 1、上下文 1024 时 0.152 对 0.113 ms（快 1.35 倍），批 16、上下文 256 时 0.738 对 0.560 ms（1.32 倍），批 37、上下文 300 时 2.33 对 1.61 ms（1.45 倍），批 32、上下文 1024 时 14.1 对 7.96 ms（1.77 倍）；2 个线程时是 1.23、1.37、1.43、1.96 倍。上下文越长、批越大，散着的槽位越多，预取省下的等待越多。第 11 章的基准（同时最多 16 个）里，一步 decode 的注意力约占一成半，这一项让整步快 5% 上下。
#
# ## 分组量化
#
# `layers/quant.py` 把一行权重按 32 个一组量化。int8 每组一个缩放 d = 最大绝对值 / 127；int4 每组一个缩放和一个最小值，q = round((w − m) / d) ∈ [0, 15]：

# %% tags=["remove-input"]
listing("minisgl/layers/quant.py", "quantize_int4")

# %% [markdown]
# 组只在一行之内，所以 q/k/v 合并成一个层、或者按列切给几个 TP rank，每个数的量化结果都不变（测试检查了这一点），量化可以在切好的本地权重上做。量化误差（全部线性层合起来的相对误差）：

# %%
# NBVAL_IGNORE_OUTPUT
from ch19_kernels import section_error

section_error(weights)

# %% [markdown]
# SmolLM2 线性层的 int4 误差是 0：它是从 Q4_1 格式的 GGUF 反量化来的，每组 32 个数本来就只取 16 种等距的值，我们的 int4 原样还原。int8 的格点是另一套（以 0 为中心），反有一点误差。随机权重的 tiny Qwen3 上 int4 的误差是 int8 的十五倍左右。
#
# ??? note "深入：LM head 为什么在 int8 下无损"
#
#     LM head（也就是词嵌入）在那个 GGUF 里是另一种格式 Q8_0：每 32 个一组、一个缩放、以 0 为中心的 8 位数，和我们的 int8 是同一套格点，所以 int8 把它原样还原，int4 反而有 9% 的误差。引擎在 int4 模式下让 LM head 用 int8（下一节），对 SmolLM2 来说整个模型的权重一个数都没变（x 仍要取整，见后文的困惑度）。
#
# ## 接进引擎
#
# 线性层和 LM head 多了一个“怎么乘”的对象，默认是 `None`（`F.linear`）。Engine 加载完权重后决定用哪种：

# %% tags=["remove-input"]
listing("minisgl/layers/quant.py", "resolve_cpu_kernels")

# %% tags=["remove-input"]
listing("minisgl/layers/quant.py", "prepare_linear_layers")

# %% [markdown]
# ??? note "深入：先查后改，LM head 用 int8，量化后的权重去了哪里"
#
#     先全部检查、再动手，不会量化到一半才发现某一层宽度不对。LM head 在两种量化下都用 int8：logits 对误差最敏感，llama.cpp 的 Q4_1 文件也不把输出层压到 4 位。
#
#     量化后线性层的 float32 权重删掉（省内存，也证明 decode 真的没在读它）。prefill 和大批的 decode 也走量化的 C++ 算子，不把权重解回 float32：解一层写出的字节是读进的 4～6 倍，每步每层都解一遍，比直接用 float32 权重还慢。
#
# ## 量：和 HF、llama.cpp 比
#
# `examples/ch19_bench.py` 让每个参赛者从同一个提示贪心生成 64 个 token，只算 decode；每个线程数一个新进程，轮流跑三轮取中位数。llama.cpp 用的是和我们同一组权重的两个 GGUF。
#
# ??? note "深入：怎么量的，llama.cpp 从哪里来"
#
#     速度取相邻两个新 token 的间隔的中位数，再取倒数：机器是共用的，别的进程偶尔抢走几十毫秒，中位数不受这几步影响（对每个参赛者都这样算）。线程数在进程开始时定下，所以每个线程数一个新进程；参赛者轮流跑，机器负载的起伏平摊到每个人身上。llama.cpp 是可选的参照：`python -m minibook.llamacpp install` 从源码编 llama-cpp-python，`prepare` 准备两个 GGUF——Q4_1 就是书里内置权重的原件，F32 是用 `gguf` 包把它逐个张量解成 float32 写回的。没装的机器上这一栏不出现。执行这一页的机器（带 AVX-512 的 Xeon）上，llama-cpp-python 0.3.36 的 Q4_1 一次喂两个以上的 token 就段错误，所以 `ch19_bench.py` 让 llama.cpp 一次只喂一个 token（`LLAMACPP_BATCH`）：量的是 decode，本来就一次一个；困惑度逐个喂，logits 也一样。

# %% tags=["milestone"]
# NBVAL_SKIP
from ch19_bench import NEW_TOKENS, decode_rates

rates = {threads: decode_rates(threads) for threads in (1, 2)}
for threads, result in rates.items():
    hf = result["HF transformers"]["rate"]
    print(f"{threads} 个线程：")
    for name, r in result.items():
        print(f"  {name:<22} {r['rate']:6.1f} token/s  {r['rate'] / hf:4.2f}× HF  "
              f"和 HF 相同的 token {r['same_as_hf']}/{NEW_TOKENS}")
print(f"（机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}）")

plt = pyplot()
fig, ax = plt.subplots(figsize=(7.2, 3.8))
names = list(rates[1])
for i, threads in enumerate(rates):
    ax.barh([j + 0.4 * i for j in range(len(names))], [rates[threads][n]["rate"] for n in names], height=0.4,
            label=f"{threads} 个线程")
ax.set_yticks([j + 0.2 for j in range(len(names))], names)
ax.invert_yaxis()
ax.set_xlabel("批大小 1 的 decode（token/s，中位数）")
ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# - **float32 和 llama.cpp 不相上下**：三样都开时是 llama.cpp F32 的 1.03 倍、0.95 倍（一个、两个线程；上一次执行是 1.14、1.06 倍）。
# - **int4 还差一点**：0.96 倍、0.78 倍（97.7 对 102.1，154.2 对 197.6）。
#
# ??? note "深入：C++ 外壳，还差在哪里"
#
#     inductor 默认用 Python 依次调用编译出的几百个内核；`compile_cpp_wrapper=True`（`--compile-cpp-wrapper`）让它生成一段 C++ 来调用。本页之外另量的（1 个线程）：int4 的一步从 11.9 ms 降到 9.2 ms；float32 一步 40 多 ms，省下的 2 ms 只占一成不到（第 18 章量到它在噪声之内）。代价是第一次编译：批大小 1 的一步，冷缓存从 28 秒变成 61 秒，所以默认关。
#
#     int4 的一步还差在线性层以外。同样另量的（1 个线程，torch profiler 下）：120 个 int4 层约 5.5 ms、int8 的 LM head 1.9 ms，inductor 生成的逐元素内核 1.0 ms，dynamo 每次调用前检查的两千多条守卫 0.8 ms，注意力 0.3 ms，调度器和采样 0.6 ms 上下。Q4_1 读的字节和我们一样多（线性层 66 MB、LM head 的 Q8_0 29 MB），一整步 8.0 ms，几乎全是读权重。两个线程时线性层快了，那几毫秒的 Python 和守卫不变，差得更多。守卫可以不查（`skip_guard_eval_unsafe`），但那样第 18 章“改了编进图里的常数就当场报错”的保护也没了，本书没有这样做。float32 的几家都贴着内存带宽：一步读 538 MB，llama.cpp 和我们只差在线性层以外的那一两毫秒。
#
# 速度之外是精度。同一段 109 个 token 的固定英文上的困惑度：HF 的 float32；HF 换上我们的 int8、int4 权重、每个线性层的输入也同样取整（和引擎算的是同一个式子）；llama.cpp 的两个 GGUF（装了才有）：

# %%
# NBVAL_IGNORE_OUTPUT
from ch19_bench import perplexities

for name, ppl in perplexities().items():
    print(f"{name:<20} {ppl:.4f}")

# %% [markdown]
# 取整 x 的代价在 ±0.1 这个量级：int4 29.96、int8 30.19、llama.cpp Q4_1 30.19，float32 30.07。
#
# ??? note "深入：int4 为什么反而低了"
#
#     SmolLM2 的权重在 int4 下一个数都没变，int4 和 float32 的差别全在把 x 取整成 8 位：这一次它让困惑度反而低了 0.11（29.96 对 30.07），写本章初稿的那台机器上是高 0.12（HF 的浮点运算在不同的 CPU 上差在最后几位，x 取整时落到哪一格跟着变）——取整 x 的代价在 ±0.1 这个量级，整数点积快就快在这里。llama.cpp 的 Q4_1 用的是同样的权重、同样取整 x，30.19。int8 高一点（30.19）：它还把 4 位格点上的权重挪到了另一套格点上。llama.cpp 的 F32 是 30.07，和 HF 只差 0.001。
#
# ## 阶段二的基准，三样都开
#
# 第 11 章的基准在本章的树里再跑一遍：paged 注意力、C++ 算子、decode 编译到批大小 64（`--cuda-graph-max-bs 64`）。阶段二那次是 1.7 倍（同时最多 16 个）和 1.8 倍（64 个）。
#
# ??? example "完整输出（编译的时间不算在吞吐里）"

# %% tags=["stage-two-bench", "fold"]
# NBVAL_SKIP
run("python examples/ch11_benchmark.py --cuda-graph-max-bs 64")

# %% [markdown]
# 这一次是 2.17 倍和 2.25 倍（radix 2.03 倍），离目标 2.5、3 倍还差一截。
#
# ??? note "深入：提高从哪里来，又卡在哪里"
#
#     - **一步 decode 便宜了，步数没变。** 两个设置下的步数、平均批大小和阶段二完全一样（336 步、平均 14.0 行；126 步、平均 37.4 行），是同一份调度；变的是每一步和 HF 比起来花的时间（两次不在同一台机器上：秒数不能直接比，对 HF 的倍数可以）。
#     - **批大小 1 已经贴着带宽。** 最后一节里我们一步 44.1 ms，是带宽上界的 89%（HF 64%）：批小的 decode 没有多少可省了。
#     - **批大了，剩下的几乎全是矩阵乘。** 同时最多 16 个时 decode 前向 45.9 s、336 步，一步约 137 ms，里面大头是 torch 的 GEMM（这时 x 有十几行，本章的 GEMV 不管），编译和 C++ 小算子省下的调用开销相比之下很小。本页之外另量的：同一个工作负载、同一棵树，编译与不编译 decode 前向是 50.2 对 50.6 s。
#
#     HF 有四成多的 token 白算（“有用的只有”那两行），我们一个不白算，但两边做 GEMM 用的是同一个 MKL、同一个核；要再往上，得让十几、几十行的矩阵乘本身更快。
#
# ## 运行

# %%
run("python examples/ch19_kernels.py")

# %% tags=["remove-cell"]
# 下面几段话引用的事实，就是上面这次运行打印的
main_out = output_of("python examples/ch19_kernels.py")
for expected in ("minisgl::linear_int4(Tensor x, Tensor blocks, int n) -> Tensor",
                 "minisgl::store_kv(Tensor(a!) kv_buffer", "int4 0.00e+00", "不同的值最多 16 种", "词嵌入） int8 0.00e+00",
                 "SmolLM2    cpp   与原始 HF 相同的 token 48/48", "tiny Qwen3 cpp   与原始 HF 相同的 token 48/48"):
    assert expected in main_out, expected

# %% [markdown]
# 值得注意的几处：
#
# - 七个算子都在 `torch.ops.minisgl` 下，签名就是登记时写的。
# - SmolLM2 的 int4 权重一个没变，相同的 token 却只有 23/48：取整 x 让贪心某步换了词，此后各走各的（换在哪步随 CPU 变）。
#
# ## 与上游的差异
#
# 上游以固定的提交 20fcd7f 为准。
#
# - 上游的算子是 CUDA 的（写 KV 池、按下标取嵌入、NCCL 的封装），用 tvm-ffi 即时编译或预先编译，调用的是 tvm-ffi 的模块函数，不经过 torch 的分派器；我们用 `torch.utils.cpp_extension` 编译、`TORCH_LIBRARY` 登记，因为 CPU 上要让 `torch.compile` 把算子留在图里（假实现），上游只用 CUDA 图，不需要。`python/minisgl/kernel/utils.py` · `load_jit`
# - 上游写 KV 池的 CUDA 算子按“一个 token 的 K/V 是多少字节”实例化模板，我们的 CPU 版本同样按字节整行拷贝，不看 dtype。`python/minisgl/kernel/store.py` · `store_cache`
# - 上游用 C++ 比较 radix 树里两段 token 是否相等（`fast_compare_key`），我们的 radix 树（第 9 章）用 torch 的比较；CPU 上单线程时它不是瓶颈。`python/minisgl/kernel/radix.py` · `fast_compare_key`
# - 上游没有权重量化，线性层总是 `F.linear`（GPU 上是 cuBLAS）。CPU 上批小的 decode 受内存带宽限制，小批量 GEMV 和量化是本书为 CPU 加的。
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 编译和加载：`python/minisgl/kernel/utils.py` · `load_jit`（第 87～129 行）、`python/minisgl/kernel/utils.py` · `load_aot`（第 53～84 行）
# - 写 KV 池：`python/minisgl/kernel/store.py` · `_jit_store_module`（第 15～27 行）、`python/minisgl/kernel/store.py` · `store_cache`（第 30～42 行）
# - radix 树的比较：`python/minisgl/kernel/radix.py` · `fast_compare_key`（第 18～20 行）
#
# ## 测试
#
# 本章的测试在 `tests/test_ch19_kernels.py`。
#
# ??? note "测试都查了什么"
#
#     三个线性层算子在随机形状、随机量级上等于 torch 的参照，坏输入是一条中文错误而不是越界读；两个 RMSNorm 算子在随机形状上与 torch 写法相差不超过 1e-5、残差和逐位相同，也能读 qkv 里切出来的不连续的头；量化误差不超过半个刻度，int4 的装法，TP 切分与合并层不改变量化结果，SmolLM2 的权重在 Q4_1 的格点上；C++ 算子的引擎（每个 RMSNorm 都换成了 C++ 的，权重在大页里，共用的只有一份）与 HF 逐 token 相同；量化后在真实的生成里逐层检查每一次乘法（只量化权重、不取整 x 的实现过不了）；不用 VNNI（走 AVX2）、连 AVX2 也不用（普通循环）另编的两份算出同样的结果；编译后的 int4 decode 与不编译的 token 相同、不重编；量化后不再留 float32 权重；设置和命令行的坏值；编不出 C++ 时 `auto` 退回 torch；重写的分页注意力在长而打散的上下文上等于 SDPA。
#
# 其中逐层检查量化的那个：

# %% tags=["remove-input"]
listing("tests/test_ch19_kernels.py", "test_every_quantized_layer_computes_rounded_x_times_rounded_w_in_a_real_run")

# %%
run("python -m pytest -q --color=no tests/test_ch19_kernels.py")

# %% [markdown]
# ## 怎么讲清楚
#
# 批大小 1 的线性层每读 4 个字节只做 2 次浮点运算，快慢全看内存带宽：一步 decode 的时间 ≈ 权重的字节数 ÷ 带宽。所以要么读得更快（自己写 GEMV：每个权重只读一次、几个核一起读），要么读得更少（按组量化：int8 每个权重 1.0625 字节，int4 0.625 字节）。量化后字节少了，解量化成了瓶颈：x 也取整成 int8，一组的点积就全是整数乘加；权重 16 行交错，VNNI 一条指令让 16 行各前进 4 个数。读几百 MB 时 4 KB 的页让 TLB 次次落空，大页让同样的循环读得更快。RMSNorm 这类小算子搬的字节很少，慢在一个个 aten 算子的分派和临时张量，把它们并成一个 C++ 算子省的是调用次数。C++ 算子进 torch 要三样东西：签名（`TORCH_LIBRARY` 的 def）、每个设备的实现（`TORCH_LIBRARY_IMPL`，分派器按设备挑）、假实现（只推形状，`torch.compile` 靠它把算子留在图里）；编出来的库按“源码 + 选项 + CPU + 版本”的摘要缓存。取整是不连续的，输入差 1e-6 就可能取到相邻的刻度：检查量化的引擎，要逐层拿它真的收到的输入和参照比，而不是比贪心的 token。

# %% [markdown]
# ## 练习
#
# 1. **带宽的账**。SmolLM2 一步 decode 要读多少 MB 的 float32 权重？如果这台机器一个核能读 28 GB/s，批大小 1 时 1 个线程每秒最多生成几个 token？int4 呢？
# 2. **批大了以后**。批大小 8 时，小批量 GEMV 每读一个权重做几次乘加？为什么到了 16、32 行，交给 torch 的 GEMM 反而更快？
# 3. **挑战：整数点积的账**。`vpdpbusd` 要一个无符号、一个有符号的乘数，int8 的权重却有正有负：`linear.cpp` 把 q 异或 0x80、再减掉 128·Σxq，为什么结果分毫不差，int32 会不会溢出？int4 的最小值那一项为什么每组只要乘一次？
#
# ??? success "参考答案"
#
#     1. 121 个线性层（含 LM head）合计约 538 MB。28 GB/s 时读一遍约 19 ms，即使别的什么都不做，1 个线程每秒最多约 52 个 token。int4 约 0.625 字节一个权重，LM head 用 int8，合计约 96 MB，读一遍约 3.4 ms，每秒最多两百多个 token——前提是每读一组，算得比读得快：把 4 位数逐个转成 float 再乘就做不到，所以本章用整数点积。
#     2. 8 次：一个权重读进寄存器，和 8 行 x 各乘加一次。行再多，每个权重做的运算越来越多，成了算力活：要把权重和 x 分块放进缓存、用寄存器分块反复使用，这是 GEMM 库花了很多年优化的事，我们的简单循环比不过它。量化的两个是另一笔账：一条 `vpdpbusd` 做 64 次 int8 乘加，是 float32 一条 FMA 的 4 倍，16 行的权重块又小到留在 L1 里反复用，所以 8 行一趟的简单循环到 256 行仍比 float32 的 GEMM 快（运行一节第二段的 M = 16、64、256 三行）。
#     3. 补码的 int8 异或 0x80（翻转符号位）当成 uint8 读，正好是 q + 128：-127 变成 1，127 变成 255。于是 Σ(q + 128)·xq = Σ q·xq + 128·Σ xq：组内的乘加全是整数，没有舍入；多出来的 128·Σ xq 也是整数，乘上缩放 d·dx 之后从浮点的累加里减掉（乘缩放这一步才有浮点舍入，和不用这个技巧时一样）。一组最大是 32 × 255 × 127 ≈ 104 万，离 int32 的 21 亿远得很。最小值 m 在一组里是同一个数：Σ m·dx·xq = m·dx·Σ xq，而 Σ xq 只和 x 有关，取整 x 时算一次，N 行权重都用它。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 57   # 把第 57 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 57    # 判题
# python practice/judge.py hint 57    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - 批大小 1 的线性层是搬运活：时间 ≈ 权重字节数 ÷ 内存带宽。小批量 GEMV 让每个权重只读一次，大页让这一遍读得更快。
# - 分组量化让字节变少；x 也取整成 int8，一组的点积就是整数乘加（`vpdpbusd`），解量化不再是瓶颈。
# - RMSNorm、写 KV 池这类小算子慢在调用次数：C++ 里一行一趟，把七八次分派并成一次。
# - 分页注意力：head_dim 编进模板、按页表预取，读得接近带宽。
# - C++ 算子 = 签名（`TORCH_LIBRARY`）+ 每个设备的实现（`TORCH_LIBRARY_IMPL`）+ 假实现（给 `torch.compile`）；编不出来时 `auto` 退回 torch。
# - 不量化的引擎与 HF 逐 token 相同；量化的引擎逐层检查“取整的 x 乘取整的 W”。
