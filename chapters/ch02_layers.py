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
# # 第 2 章 算子层
#
# 第 0 章的最小引擎直接调用 Hugging Face 的模型；第 1 章写好了请求和批次的记账。从这一章起，我们自己搭模型：先写积木，也就是一个解码层里用到的每一种算子——RMSNorm、旋转位置编码、门控激活、几种线性层、词表层和注意力层。每个算子的数学都只有一两行，这一章真正要讲的是推理引擎里它们为什么长成这个样子：层的基类不用 `nn.Module`，因为推理用不上 autograd，又要在 meta 设备上先搭架子再换真权重；残差的加法被挪进了下一个 RMSNorm；RoPE 不能假设位置是 `0..T-1`；LM head 在 prefill 时只算每个请求的最后一个 token。还有一件事一开始就要定下来：线性层和词表层直接写成张量并行（TP）的最终形态，单卡只是 `tp_size = 1` 的特例。等到第 16 章真的把模型切到多张卡上时，这些层一行都不用改。本章在一个进程里模拟两个 rank，让你亲眼看到各 rank 的部分和加起来、词表切片拼起来，都等于不切分的结果。

# %% tags=["remove-cell"]
from minibook.page import *
_ = setup(2)  # 赋值而不显示：返回的树路径随机器而变

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. minisgl 的层为什么不继承 `nn.Module`？一个在 meta 设备上搭好的模型怎么拿到真权重？如果用 `nn.Module` 的 `load_state_dict`，会发生什么？
# 2. `RMSNormFused.forward(x, residual)` 返回什么？一个解码层里，残差加法发生在哪里？它和教科书上的 `x = x + f(norm(x))` 是同一个计算吗？
# 3. 一个 decode 批里三个请求的位置是 `[17, 3, 250]`。RoPE 为什么不能用 `arange(3)` 当位置？在 meta 设备上建模型时，cos/sin 表为什么必须照样在 CPU 上算出来？
# 4. TP=2 时，`gate_up_proj` 在 rank 0 上的本地权重由哪几块组成？为什么不能把合并好的 `[2I, H]` 矩阵直接切成两半？Qwen3-0.6B（16 个 q 头、8 个 KV 头）在 TP=16 时每个 rank 的 `qkv_proj` 有几行？
# 5. 行并行层的 bias 为什么在 all-reduce 之后才加？prefill 时 LM head 输出的形状是什么，为什么不是 `[token 数, 词表大小]`？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 推理用不到 autograd、hook 和 train/eval 切换，`nn.Module` 的这套机制只带来开销和陷阱（例如 `Parameter` 默认 `requires_grad=True`，不加 `no_grad` 前向就会记计算图）。`BaseOP` 把权重当作普通属性，`state_dict` 按属性名拼出和 Hugging Face 一样的键；`load_state_dict` 把给定的张量**赋值**给属性，于是 meta 上只有形状的空壳整个被换成真张量。`nn.Module.load_state_dict` 默认是往已有参数里 `copy_`，往 meta 参数里拷贝什么也不做：只给一条警告，参数还留在 meta 上（除非传 `assign=True`）。
#     2. 返回 `(norm(x + residual), x + residual)`；`residual=None` 时返回 `(norm(x), x)`。子层的输出不立刻加回残差，而是连同旧的残差一起交给**下一个** `RMSNormFused`，由它先加再归一化。把一层层展开，它和 `x = x + f(norm(x))` 是同一个计算——连浮点结果都逐位相同（浮点加法满足交换律）——只是加法和归一化可以合进同一个内核，少读写一遍整个隐状态。
#     3. 一批里的 token 来自不同的请求，每个 token 的位置是它在**自己那个序列**里的位置。用 `arange(3)` 就等于把三个请求当成同一个序列的第 0、1、2 个 token，旋转角度全错，而且不会报任何错。cos/sin 表是算出来的缓存，不是从文件加载的权重；要是跟着默认设备建在 meta 上，它就永远没有数据。所以 `RotaryEmbedding` 显式在 CPU 上用 float32 算好，第一次前向时再搬到 q 所在的设备。
#     4. rank 0 的本地权重是 `[gate 的第 0 段（I/2 行）; up 的第 0 段（I/2 行）]`：本地输出的前一半是本 rank 那段 gate，后一半是同一段 up，`silu_and_mul` 拿来就能用。先拼再切，rank 0 拿到的是整个 gate、rank 1 拿到的是整个 up，rank 0 上的 `silu_and_mul` 算的就成了 `silu(gate 前半) × gate 后半`——形状全对，结果全错。Qwen3-0.6B 在 TP=16 时每个 rank 1 个 q 头；8 个 KV 头不够 16 个 rank 分，每个 rank 放 1 个（每个 KV 头复制到 2 个 rank 上），所以 `qkv_proj` 有 `(1 + 2 × 1) × 128 = 384` 行。
#     5. all-reduce 是把各 rank 的结果相加。如果每个 rank 都带着 bias 去加，bias 就被加了 `tp` 次；所以先把部分和加起来，再加一次 bias。prefill 时只取每个请求的最后一个 token，输出 `[请求数, 词表大小]`——只有最后一个位置的 logits 会拿去采样。在 Qwen3-0.6B 上，一个 2048 token 的提示若算全部位置，logits 就是 `2048 × 151936` 个 float32（约 1.2 GB），外加白算约 0.64 TFLOP。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章新建 `minisgl/layers/` 下的 8 个文件。`minisgl/distributed/` 的 3 个文件是**提前引入**的：线性层和词表层一建好就要知道“我是第几个 rank、一共几个”，前向时要调用 all-reduce / all-gather，所以它们此刻就得存在。`info.py` 记录本进程在 TP 里的位置（`DistributedInfo(rank, size)`，没登记过就当单卡 `(0, 1)`）；`impl.py` 是集合通信的唯一入口 `DistributedCommunicator`，真正干活的是它的插件列表里的最后一个实现，默认走 `torch.distributed`。多进程、进程组、gloo 与 NCCL 都留到第 16 章再讲；本章只在一个进程里模拟多个 rank。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch02_layers.py`，分两半走一遍本章的层。前一半是单卡：按 SmolLM2 的 `config.json` 在 meta 设备上搭出一个解码层要用的全部层，看权重的名字和形状，换上随机的真权重，让 5 个 token 流过这一层，逐个算子打印形状。后一半是张量并行：在一个进程里用两个线程扮演两个 rank，建每个 rank 的层之前先 `set_tp_info(rank, 2)`，权重从一份完整的随机权重里按切法切出来，集合通信由一个在线程之间交换张量的插件完成；然后看列并行、行并行、词表并行各自存什么、算出什么，拼起来、加起来是否等于单卡。它只用到上面这棵树里的文件；`python tools/steps.py check` 会逐章搭出这棵树、跑这个 main 和树里的全部检查。只想跑这一个 main：
#
# ```bash
# python tools/steps.py run 2 -- python examples/ch02_layers.py
# ```
#
# main 里的解码层把本章的层按 Llama 的顺序串起来（第 3 章的 `LlamaDecoderLayer` 也是这么拼的）。属性名就是权重名；注意力层挂在下划线开头的 `_attn` 上，它不是权重：

# %% tags=["remove-input"]
listing("examples/ch02_layers.py", "LlamaBlock")

# %% [markdown]
# 模拟 TP 的关键是一个通信插件。层只认 `DistributedCommunicator`，它把调用转给 `plugins` 列表里的最后一个实现；把下面这个 `ThreadComm` 追加进去，层的代码一行不改，就能在线程之间“通信”：每个 rank 一个线程，集合通信时在栅栏处等齐所有 rank，再求和（all-reduce）或按 rank 顺序拼接（all-gather）。`sent` 记下每个 rank 交出去的张量，好让我们看部分和。本章后面的几个单元也借用它。

# %% tags=["remove-input"]
listing("examples/ch02_layers.py", "ThreadComm")

# %% [markdown]
# ## 一张图：一个解码层里的算子与张量并行
#
# ![一个解码层的数据流：嵌入层、两个带残差的 RMSNorm、列并行的 qkv_proj 和 gate_up_proj、注意力层、行并行的 o_proj 和 down_proj、LM head；右侧是 Qwen3-0.6B 在 TP=2 时一个 rank 上的张量形状，红色标出三处通信](../assets/ch02_layer_flow.svg)
#
# 从上往下读。左边那条紫色竖线是**残差流**：它只在三个 `RMSNormFused` 里被读写，每个子层的输出都先“挂”着，等到下一个归一化再加回去（下面一节细讲）。中间的方块是本章的层，颜色表示它们在张量并行下的切法：蓝色是**列并行**（按输出维切，各 rank 算出输出的一段，不用通信），橙色是**行并行**（按输入维切，各 rank 算出完整形状的部分和，要 all-reduce），绿色是**词表并行**，灰色是每个 token、每个头各算各的、根本不需要切的部分。右边是 Qwen3-0.6B 在 TP=2 时**一个 rank** 上的张量形状，`T` 是这一步的 token 数，`R` 是请求数。
#
# 红色的通信只有三种位置：嵌入层之后一次 all-reduce，每个解码层两次 all-reduce（`o_proj` 和 `down_proj` 之后），LM head 之后一次 all-gather。列并行的输出正好是下一个行并行需要的那一段输入，中间的注意力（按头独立）和 `silu_and_mul`（逐元素）都不需要任何通信——这就是 Megatron 式切法的全部奥秘，本章的线性层从一开始就按它来写。

# %% [markdown]
# ## BaseOP：为什么不用 nn.Module
#
# 训练框架里，层都继承 `torch.nn.Module`。推理引擎用它却有三处别扭。第一，`Module` 的很多机制是为训练服务的：`Parameter` 默认 `requires_grad=True`，前向时 autograd 要记计算图（得处处记着包一层 `no_grad` / `inference_mode`）；每次 `__call__` 都要检查有没有注册 hook；还有 `train()` / `eval()` 的状态切换。推理一样都用不上。第二，参数存在 `_parameters` 这个私有字典里，靠 `__getattr__` 兜底查找，每次读 `self.weight` 都多绕一圈。第三，也是最要紧的：我们要先在 meta 设备上把模型“搭个架子”（只记形状、不分配内存，几 GB 的模型一瞬间建好），再把从文件里流式读出的权重一块块装进去。`Module.load_state_dict` 是往已有的参数里 `copy_`，往 meta 张量里拷贝是个空操作。
#
# minisgl 的 `BaseOP` 只保留推理真正需要的两件事：按名字导出权重、按名字装入权重。

# %% tags=["remove-input"]
listing("minisgl/layers/base.py", "BaseOP")

# %% [markdown]
# 规则只有几条，都写在 `named_children` 里：
#
# - **权重就是普通的张量属性，子层就是普通的 `BaseOP` 属性。** `state_dict` 按属性名一层层拼出键：`model` 下的 `layers` 下的 `0` 下的 `self_attn` 下的 `qkv_proj` 的 `weight`，就是 `model.layers.0.self_attn.qkv_proj.weight`——和 Hugging Face 的权重名一致（唯一的例外是 q/k/v 合并成 `qkv_proj`、gate/up 合并成 `gate_up_proj`，由第 3 章的加载器在读文件时合并）。
# - **下划线开头的属性不是权重。** RoPE 的 cos/sin 表（`_cos`、`_sin`）、通信器（`_comm`）、借来用的子层（`_attn`）都用下划线开头，`state_dict` 看不见它们，也就不会要求从文件里加载。`eps`、`head_dim` 这样的非张量属性也不算。
# - **装入是赋值，不是拷贝。** `load_state_dict` 先把所有键、形状、dtype 全部核对一遍，有一处不对就报错，而且报错时一个张量都没换；全部对上之后，再用 `setattr` 把新张量挂到对应的属性上。meta 上的空壳就这样被整个换掉。
#
# `OPList` 是唯一的容器：它把子层命名为 `"0"`、`"1"`……，对应 HF 的 `model.layers.0`、`model.layers.1`。

# %% tags=["remove-input"]
listing("minisgl/layers/base.py", "OPList")

# %% [markdown]
# 下面用本章的层拼一个 Qwen3 式的小模型：嵌入层、两个解码层、最后的 RMSNorm。尺寸取 Qwen3-0.6B 的真实尺寸——在 meta 设备上，这不花任何内存。`Attn` 把 `q_norm`、`k_norm` 挂在自己身上（HF 的权重名是 `self_attn.q_norm.weight`），注意力层只是借用它们，所以注意力层挂在 `_attn` 上。第 3 章的模型就是这样拼出来的。

# %%
import json
import time

import torch
import torch.nn.functional as F
from minibook.models import qwen3_06b_config, smollm2

from minisgl.layers import (AttentionLayer, BaseOP, LinearColParallelMerged,
                            LinearOProj, LinearQKVMerged, LinearRowParallel, OPList,
                            RMSNorm, RMSNormFused, VocabParallelEmbedding, get_rope,
                            silu_and_mul)

torch.set_num_threads(1)  # 本页的张量都很小：单线程更快，也更稳定


class Attn(BaseOP):
    def __init__(self, layer_id, c):
        h, d, eps = c["hidden_size"], c["head_dim"], c["rms_norm_eps"]
        nq, nkv = c["num_attention_heads"], c["num_key_value_heads"]
        self.qkv_proj = LinearQKVMerged(h, d, nq, nkv)
        self.q_norm, self.k_norm = RMSNorm(d, eps), RMSNorm(d, eps)
        rope = get_rope(d, d, c["max_position_embeddings"], c["rope_theta"])
        # 注意力层只是借用 q_norm/k_norm：挂在下划线属性上，不重复进 state_dict
        self._attn = AttentionLayer(layer_id, nq, nkv, d, rope,
                                    self.q_norm, self.k_norm)
        self.o_proj = LinearOProj(nq * d, h)

    def forward(self, x):
        return self.o_proj.forward(self._attn.forward(self.qkv_proj.forward(x)))


class Mlp(BaseOP):
    def __init__(self, c):
        h, inter = c["hidden_size"], c["intermediate_size"]
        self.gate_up_proj = LinearColParallelMerged(h, [inter, inter])
        self.down_proj = LinearRowParallel(inter, h)

    def forward(self, x):
        return self.down_proj.forward(silu_and_mul(self.gate_up_proj.forward(x)))


class Layer(BaseOP):
    def __init__(self, layer_id, c):
        h, eps = c["hidden_size"], c["rms_norm_eps"]
        self.input_layernorm = RMSNormFused(h, eps)
        self.self_attn = Attn(layer_id, c)
        self.post_attention_layernorm = RMSNormFused(h, eps)
        self.mlp = Mlp(c)

    def forward(self, x, residual):
        x, residual = self.input_layernorm.forward(x, residual)
        x = self.self_attn.forward(x)
        x, residual = self.post_attention_layernorm.forward(x, residual)
        return self.mlp.forward(x), residual


class Model(BaseOP):
    def __init__(self, c, num_layers):
        h, vocab = c["hidden_size"], c["vocab_size"]
        self.embed_tokens = VocabParallelEmbedding(vocab, h)
        self.layers = OPList([Layer(i, c) for i in range(num_layers)])
        self.norm = RMSNormFused(h, c["rms_norm_eps"])

    def forward(self, input_ids):
        x, residual = self.embed_tokens.forward(input_ids), None
        for layer in self.layers:
            x, residual = layer.forward(x, residual)
        return self.norm.forward(x, residual)[0]


qwen3 = json.loads(qwen3_06b_config().read_text(encoding="utf-8"))
with torch.device("meta"):  # 只记形状、不分配内存
    model = Model(qwen3, num_layers=2)
state = model.state_dict(prefix="model.")
for name, w in state.items():
    print(f"{name:<48}{str(list(w.shape)):<16}{w.device}")
assert list(state)[:3] == ["model.embed_tokens.weight",
                           "model.layers.0.input_layernorm.weight",
                           "model.layers.0.self_attn.qkv_proj.weight"]
assert "model.layers.1.self_attn.q_norm.weight" in state
assert all(w.is_meta for w in state.values())
# 下划线开头的属性（_attn、_cos、_comm）不是权重
assert not any(part.startswith("_") for k in state for part in k.split("."))

# %% [markdown]
# 键的顺序就是属性的定义顺序，`OPList` 里的层名是 `0`、`1`；`_attn` 和它里面的 RoPE 表都不在里面，`q_norm` 只出现一次（在 `self_attn` 下）。既然 meta 上建模型不花内存，不妨把 Qwen3-0.6B 的 28 层全部建出来数一数参数：

# %%
start = time.perf_counter()
with torch.device("meta"):
    full_model = Model(qwen3, num_layers=qwen3["num_hidden_layers"])
elapsed = time.perf_counter() - start
weights = full_model.state_dict().values()
n_params = sum(w.numel() for w in weights)
print(f"28 层全部建好：{len(weights)} 个权重、{n_params / 1e6:.1f}M 个参数")
print(f"真分配的话 float32 要 {n_params * 4 / 1e9:.1f} GB；"
      "而它们全在 meta 上，没有一个字节的数据")
assert all(w.is_meta and w.untyped_storage().data_ptr() == 0 for w in weights)
assert 590e6 < n_params < 600e6  # 约 0.6B（嵌入与 LM head 共享，只算一次）

# %%
# NBVAL_IGNORE_OUTPUT
print(f"耗时 {elapsed * 1000:.0f} ms")

# %% [markdown]
# 现在换上真权重。为了快，换一个小尺寸的配置；装进去的张量**就是**传进去的那个对象，不是拷贝。作为对照，`nn.Linear` 在 meta 上建好以后用 `load_state_dict` 装权重：没有报错，只有一条警告，参数还在 meta 上。

# %%
tiny = dict(hidden_size=32, head_dim=8, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=48, vocab_size=50,
            rms_norm_eps=1e-6, max_position_embeddings=256, rope_theta=10000.0)
with torch.device("meta"):
    small = Model(tiny, num_layers=2)
gen = torch.Generator().manual_seed(0)
real = {}
for k, v in small.state_dict().items():
    w = torch.randn(v.shape, generator=gen)
    # 归一化层的权重在 1 附近，其余是小的随机数
    real[k] = 1 + 0.2 * w if k.endswith("norm.weight") else 0.3 * w
small.load_state_dict(real)
attn0 = small.layers[0].self_attn
assert small.layers[1].mlp.down_proj.weight is real["layers.1.mlp.down_proj.weight"]
assert attn0._attn.q_norm is attn0.q_norm  # 同一个对象：注意力层也看到了真权重
print("BaseOP：qkv_proj.weight 现在在", attn0.qkv_proj.weight.device)

try:
    small.load_state_dict({k: v for k, v in real.items() if ".1.mlp" not in k})
except ValueError as e:
    print("少了权重：", e)

import warnings

with torch.device("meta"):
    lin = torch.nn.Linear(4, 3)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    lin.load_state_dict({"weight": torch.ones(3, 4), "bias": torch.zeros(3)})
print("nn.Module：weight 还在", lin.weight.device)
print("  警告：", str(caught[0].message)[:82], "…")
assert lin.weight.is_meta

# %% [markdown]
# 还有 autograd：`nn.Linear` 的参数默认要梯度，不包 `no_grad` 的前向会挂上计算图，中间激活因此被留着等反向；`BaseOP` 的权重是普通张量，前向得到的就是普通张量。

# %%
x = torch.randn(2, 4)
print("nn.Linear 的输出：grad_fn =", torch.nn.Linear(4, 3)(x).grad_fn.name())
row = LinearRowParallel(4, 3)
row.weight = torch.randn(3, 4)
print("BaseOP 的输出：grad_fn =", row.forward(x).grad_fn)
assert row.forward(x).grad_fn is None

# %% [markdown]
# ## RMSNorm：在 float32 里算，残差挂到下一个归一化
#
# RMSNorm 把每个 token 的隐向量除以它的均方根，再逐维乘一个可学的 `weight`：`x / sqrt(mean(x²) + eps) * weight`。和 LayerNorm 比，它不减均值、没有 bias。Llama 和 Qwen3 的每个解码层有两个：注意力前的 `input_layernorm` 和 MLP 前的 `post_attention_layernorm`，模型最后还有一个 `model.norm`。

# %% tags=["remove-input"]
listing("minisgl/layers/norm.py", "rms_norm")

# %% [markdown]
# 平方和求均值都先转成 float32 再算，算完再转回输入的 dtype。推理常用 bf16 / fp16：fp16 能表示的最大数是 65504，而隐状态里偶尔会有几百的“离群值”，`300² = 90000` 直接溢出成 `inf`，整行被除成 0；bf16 不会溢出，但只有 8 位有效位，几百个平方相加的舍入误差很大。乘 `weight` 的时机（先转回、再乘）照抄 Hugging Face，这样 float32 下和 HF 逐位相同，低精度下也和 HF 舍入得一样。

# %%
from minisgl.layers.norm import rms_norm

# 一行 16 个数，其中 4 个是几百的离群值
h = torch.tensor([[300.0] * 4 + [1.0] * 12], dtype=torch.float16)
w16 = torch.ones(16, dtype=torch.float16)
naive = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w16  # 全程 fp16
ours = rms_norm(h, w16, 1e-6)
print("全程 fp16：mean(x²) =", h.pow(2).mean(-1).item(), "→", naive[0, :5].tolist())
print("float32 里算：               →", ours[0, :5].tolist(), ours.dtype)
assert torch.all(naive == 0) and ours.dtype == torch.float16
assert abs(ours[0, 0].item() - 2.0) < 1e-2

# %% [markdown]
# ### 残差加法挪进了下一个归一化
#
# 教科书上的 pre-norm 解码层是这样写的：
#
# ```text
# x = x + attn(input_layernorm(x))
# x = x + mlp(post_attention_layernorm(x))
# ```
#
# 每个子层的输出立刻加回残差流。可是紧跟在“加回残差”之后的，永远是下一个归一化（下一个子层的、或者最后的 `model.norm`）：先读 `x` 和子层输出、写出它们的和，再读一遍这个和去做归一化。把这两步合成一步，只读一遍、写两样东西（归一化的结果和新的残差），就省下一次对整个隐状态的读写——GPU 上由一个融合内核完成（上游用 flashinfer 的 `fused_add_rmsnorm`）。为此接口改成 `forward(x, residual) -> (normed, residual)`：

# %% tags=["remove-input"]
listing("minisgl/layers/norm.py", "RMSNormFused")

# %% [markdown]
# 于是子层的输出不再自己加回去，而是原样交给下一个 `RMSNormFused`，连同一路带过来的 `residual`。一层里的数据流变成：
#
# | 调用 | 传入 `x` | 传入 `residual` | 返回的 `normed` | 返回的 `residual` |
# | --- | --- | --- | --- | --- |
# | 第 0 层 `input_layernorm` | `e`（嵌入） | `None` | `norm(e)` | `e` |
# | 第 0 层 `post_attention_layernorm` | `a₀`（注意力输出） | `e` | `norm(e + a₀)` | `e + a₀` |
# | 第 1 层 `input_layernorm` | `m₀`（MLP 输出） | `e + a₀` | `norm(e + a₀ + m₀)` | `e + a₀ + m₀` |
# | …… | | | | |
# | `model.norm` | 最后一层的 MLP 输出 | 残差流 | 交给 LM head | 不再用 |
#
# 每一行的 `normed` 都和教科书写法里那个归一化的输入一模一样，只是“加”被推迟了半步。第 0 层的 `input_layernorm` 还没有残差流，`residual=None` 时残差就是 `x` 本身；最后一层的 MLP 输出要靠 `model.norm` 加回去——忘了这一步，最后一层 MLP 的贡献就丢了。最容易犯的错是把 `normed` 当成新的残差交回去：形状全对，不报错，残差流从此被“归一化”，模型输出面目全非。
#
# 用上面那个两层的小模型验证一遍：`Model.forward` 用的是融合的写法，下面再按教科书的写法手算一遍，用的是同一批层对象。

# %%
# 借用 main 里的朴素注意力“后端”（每个请求只和自己这一步的 token 做因果注意力）
# 和造批次的小工具；真正的后端是第 5 章的事
from examples.ch02_layers import CausalAttention, make_batch

from minisgl.core import Context, set_global_ctx

ctx = Context(page_size=1)
ctx.attn_backend = CausalAttention()
set_global_ctx(ctx)
batch = make_batch([5, 3])  # 两个请求，5 个和 3 个 token
ids = torch.tensor([3, 14, 15, 9, 26, 5, 35, 8], dtype=torch.int32)

with ctx.forward_batch(batch):
    fused = small.forward(ids)

    x = small.embed_tokens.forward(ids)  # 教科书写法：每个子层之后立刻加回残差
    for layer in small.layers:
        x = x + layer.self_attn.forward(layer.input_layernorm.forward(x)[0])
        x = x + layer.mlp.forward(layer.post_attention_layernorm.forward(x)[0])
    classic = small.norm.forward(x)[0]

print("两种写法的最大差：", (fused - classic).abs().max().item())
assert torch.equal(fused, classic)  # 逐位相同：做的是同样的加法，只是换了个地方做

# %% [markdown]
# 逐位相同，不是“差不多”：两种写法做的是同一串浮点运算，只是 `a + r` 和 `r + a` 的区别，而浮点加法满足交换律。（结合律就不满足了：如果融合写法改成先把两个子层的输出加在一起、再加残差，结果就只能近似相等。）
#
# ## RoPE：按每个 token 自己的位置旋转
#
# 注意力本身不知道 token 的先后。旋转位置编码（RoPE）在算 `q·k` 之前，把 q 和 k 都按**各自的位置** `p` 转一个角度：把一个头的 `D` 维向量看成 `D/2` 对坐标，第 `i` 对转 `p·θᵢ`，`θᵢ = base^(-2i/D)`。旋转不改变长度，而两个旋转过的向量的点积只和角度之差有关——位置 `m` 的 q 和位置 `n` 的 k 的点积只取决于 `m − n`，相对位置就这样进了注意力分数。

# %% tags=["remove-input"]
listing("minisgl/layers/rotary.py", "RotaryEmbedding")

# %% [markdown]
# 哪两维算一对有两种约定。我们用的是“旋转一半”（rotate-half，也叫 neox 风格）：第 `i` 维和第 `i + D/2` 维是一对，和 Hugging Face 的 Llama、Qwen3 一致；原始 Meta Llama 代码用的是相邻两维 `(2i, 2i+1)` 一对。约定用错不会报错，只会让模型输出胡话——权重是按哪种约定训练的，就只能用哪种。`_rotate` 里的两行正是复数乘法 `(x₁ + i·x₂)(cos + i·sin)` 的实部和虚部。`rotary_dim < head_dim` 时只旋转前 `rotary_dim` 维，其余原样保留（有的模型只旋转一部分维度）。
#
# 要紧的是 `forward` 的 `positions` 参数。第 1 章说过，一批里的 token 来自不同的请求，首尾相接成一条序列，每个 token 带着它在**自己那个请求**里的位置；decode 时三个请求各送 1 个 token，位置可能是 `[17, 3, 250]`。所以不能用 `arange(T)`，而是预先算好一张表（第 `p` 行是位置 `p` 的全部角度的 cos 和 sin），前向时按 `positions` 查表，每个 token 取自己那一行，再广播到所有头上。下面用一个独立的参照——把每一对 `(x[i], x[i+D/2])` 当成复数，在 float64 里乘上 `e^{i·p·θᵢ}`——检查一个 decode 批：

# %%
from minisgl.layers import RotaryEmbedding

D = 8
rope = RotaryEmbedding(D, D, max_position=512, base=10000.0)
positions = torch.tensor([17, 3, 250])  # decode 批：三个请求各 1 个 token
gen = torch.Generator().manual_seed(1)
q = torch.randn(3, 4, D, generator=gen)  # 4 个 q 头
k = torch.randn(3, 2, D, generator=gen)  # 2 个 KV 头


def rope_complex(x, pos, base=10000.0):
    half = x.shape[-1] // 2
    theta = base ** (-2 * torch.arange(half, dtype=torch.float64) / x.shape[-1])
    z = torch.complex(x[..., :half].double(), x[..., half:].double())
    angle = pos.double()[:, None] * theta  # [T, D/2]
    z = z * torch.polar(torch.ones_like(angle), angle)[:, None, :]
    return torch.cat([z.real, z.imag], dim=-1).float()


rq, rk = rope.forward(positions, q, k)
wrong_q, _ = rope.forward(torch.arange(3), q, k)  # 错误：当成同一个序列的 0, 1, 2
assert torch.allclose(rq, rope_complex(q, positions), atol=1e-5)
assert torch.allclose(rk, rope_complex(k, positions), atol=1e-5)
print("按 [17, 3, 250] 旋转：q、k 都与复数参照一致（最大差 < 1e-5）")
err = (wrong_q - rope_complex(q, positions)).abs().max().item()
print(f"误用 arange(3)：与复数参照的最大差 {err:.2f}")
same_len = torch.allclose(rq.norm(dim=-1), q.norm(dim=-1), atol=1e-5)
print("旋转前后每个头的长度不变：", same_len)
assert not torch.allclose(wrong_q, rq, atol=1e-2)

# %% [markdown]
# 那张表为什么写明 `device="cpu"`？模型是在 `with torch.device("meta"):` 里建的，这个上下文会把所有**没指定设备**的张量都建到 meta 上。权重建在 meta 上没关系，稍后会被文件里的真权重换掉；可 cos/sin 表是算出来的，不会从任何文件加载——它要是也建在 meta 上，就永远只有形状没有数。所以它显式在 CPU 上、用 float32 算好，第一次前向时发现 q 在别的设备上（比如 GPU），就整张表搬过去一次。表用下划线开头，不进 `state_dict`；`get_rope` 用 `lru_cache` 缓存，同样参数的表全模型只算一份，所有层共用。

# %%
from minisgl.layers.rotary import get_rope

with torch.device("meta"):
    probe = torch.arange(0, 8, 2, dtype=torch.float32)  # 没指定设备：建到了 meta 上
    table = RotaryEmbedding(128, 128, qwen3["max_position_embeddings"],
                            qwen3["rope_theta"])
mib = 2 * table._cos.numel() * 4 / 2**20
print(f"meta 上下文里：普通张量在 {probe.device}，RoPE 表在 {table._cos.device}，"
      f"形状 {list(table._cos.shape)}，cos 与 sin 共 {mib:.0f} MiB")
print("state_dict：", table.state_dict())
assert table._cos.device.type == "cpu" and table.state_dict() == {}
# 同样参数只算一张表：小模型的两层共用它
assert get_rope(8, 8, 256, 10000.0) is small.layers[1].self_attn._attn._rotary

# %% [markdown]
# Qwen3-0.6B 的 `max_position_embeddings` 是 40960，`head_dim = 128`，表是 `40960 × 64` 的 cos 加同样大的 sin，20 MiB；28 层共用这一份。
#
# ## silu_and_mul 与合并的 gate_up
#
# Llama 和 Qwen3 的 MLP 是门控的（SwiGLU）：`down(silu(gate(x)) * up(x))`。`gate` 和 `up` 的输入相同、形状相同，与其做两次矩阵乘，不如把两块权重上下叠成一个 `[2I, H]` 的 `gate_up_proj`，一次矩阵乘同时算出两样：输入只读一遍，少一次内核启动，大矩阵乘的效率也更高。约定是输出的前一半是 gate、后一半是 up，`silu_and_mul` 按这个布局取：

# %% tags=["remove-input"]
listing("minisgl/layers/activation.py", "silu_and_mul")

# %%
gen = torch.Generator().manual_seed(2)
gate = torch.randn(6, 4, generator=gen)  # [I, H]
up = torch.randn(6, 4, generator=gen)
x = torch.randn(3, 4, generator=gen)
gate_up = torch.cat([gate, up])  # 单卡的 gate_up_proj.weight：[2I, H]
merged = silu_and_mul(x @ gate_up.T)
assert torch.allclose(merged, F.silu(x @ gate.T) * (x @ up.T), atol=1e-6)
print("一次矩阵乘 + silu_and_mul = silu(gate) * up：", list(merged.shape))

# %% [markdown]
# 注意力那边同理：q、k、v 三个投影的输入都是同一个 `x`，合并成一个 `qkv_proj`，输出依次是 q 的所有头、k 的所有头、v 的所有头。合并带来一个后果：一旦张量并行，合并后的矩阵该怎么切，就不是“切成几段”那么简单了。下一节就讲这个。

# %% [markdown]
# ## 线性层：一开始就写成张量并行
#
# 切一个 `y = x @ W.T`（`W` 的形状是 `[out, in]`）只有两种切法：
#
# | 切法 | 切 `W` 的哪一维 | 每个 rank 得到 | 通信 | 本章的层 |
# | --- | --- | --- | --- | --- |
# | 列并行 | 第 0 维（输出维，`W` 的行） | 输出的一段 `[T, out/tp]` | 不需要 | `LinearQKVMerged`、`LinearColParallelMerged` |
# | 行并行 | 第 1 维（输入维，`W` 的列） | 完整形状的**部分和** `[T, out]` | all-reduce 求和 | `LinearRowParallel`、`LinearOProj` |
# | 不切 | — | 完整输出 | 不需要 | `LinearReplicated` |
#
# 名字来自数学上的 `y = xA`（`A = Wᵀ`）：“列并行”切的是 `A` 的列，也就是 `W` 的**行**。这是最容易搞反的地方。
#
# ![切权重的三种情形：合并的 gate_up 先各自切再拼（正确）与先拼再切（错误）；Qwen3-0.6B 在 TP=16 时 q 头与复制的 KV 头；行并行的部分和经 all-reduce 相加、bias 只加一次](../assets/ch02_tp_split.svg)
#
# 每个 rank 在 `__init__` 里读一次 `get_tp_info()`，据此只分配本地那一份权重（`torch.empty`，在 meta 上就不花内存）；单卡时 `get_tp_info()` 返回 `DistributedInfo(0, 1)`，每个层自然退化成普通的线性层。这就是提前引入的 `distributed/info.py` 的全部用处：

# %% tags=["remove-input"]
listing("minisgl/distributed/info.py", "set_tp_info")

# %% tags=["remove-input"]
listing("minisgl/distributed/info.py", "get_tp_info")

# %% [markdown]
# 真正的 TP 里每个 rank 是一个进程，启动时登记一次自己的位置（第 16 章）。在一个进程里模拟时，我们在**建每个 rank 的层之前**换着登记：`set_tp_info(0, 2)` 建 rank 0 的层，`set_tp_info(1, 2)` 建 rank 1 的层，建完回到 `(0, 1)`。层只在 `__init__` 里读它，建好之后就和全局状态无关了。
#
# 所有线性层共用一个小小的基类，权重是 `[local_out, local_in]`：

# %% tags=["remove-input"]
listing("minisgl/layers/linear.py", "_LinearTPImpl")

# %% [markdown]
# ### 列并行：合并的层要先各自切、再拼
#
# 列并行按输出维切，每个 rank 算出输出的一段，彼此无关，不用通信。麻烦出在合并的层上。`LinearColParallelMerged` 的本地输出大小是**每个投影各自**除以 `tp` 再相加：

# %% tags=["remove-input"]
listing("minisgl/layers/linear.py", "LinearColParallelMerged")

# %% [markdown]
# 也就是说，rank `r` 的本地权重是“gate 的第 `r` 段”叠上“up 的第 `r` 段”，本地输出的前一半是 gate、后一半是 up——和单卡的布局一样，`silu_and_mul` 不用改。如果图省事，把合并好的 `[2I, H]` 直接按行切成 `tp` 段，rank 0 拿到的是整个 gate，rank 1 拿到的是整个 up：形状完全对，不报任何错，rank 0 上的 `silu_and_mul` 算的却是 `silu(gate 前半) × gate 后半`。下面用两个模拟的 rank 对比两种切法（列并行不通信，两个 rank 挨个算就行）：

# %%
from minisgl.distributed import set_tp_info

I, H, TP = 6, 4, 2
full_act = F.silu(x @ gate.T) * (x @ up.T)  # 单卡的激活 [T, I]
n = I // TP  # rank r 应该得到 full_act 的第 r 段列：[:, r*n:(r+1)*n]


def rows(w, r, size):  # 按输出维均分，取第 r 段
    m = w.shape[0] // size
    return w[r * m:(r + 1) * m]


cuts = {"先各自切、再拼": lambda r: torch.cat([rows(gate, r, TP), rows(up, r, TP)]),
        "先拼、再切    ": lambda r: rows(torch.cat([gate, up]), r, TP)}
for name, cut in cuts.items():
    errs = []
    for r in range(TP):
        set_tp_info(r, TP)  # 建层之前登记“我是谁”
        layer = LinearColParallelMerged(H, [I, I])
        layer.load_state_dict({"weight": cut(r)})
        act = silu_and_mul(layer.forward(x))  # [T, I/tp]
        errs.append((act - full_act[:, r * n:(r + 1) * n]).abs().max().item())
    set_tp_info(0, 1)
    diffs = "、".join(f"{e:.2f}" for e in errs)
    print(f"{name}：本地权重 {list(layer.weight.shape)}，"
          f"各 rank 的激活与单卡对应段的最大差 {diffs}")
    if name.startswith("先各自"):
        assert max(errs) < 1e-6
    else:
        assert max(errs) > 0.1

# %% [markdown]
# 这也是第 3 章加载器的顺序：从文件里读出 `gate_proj` 和 `up_proj`，先各自按 rank 切，再在本 rank 上拼成 `gate_up_proj`。

# %% [markdown]
# ### LinearQKVMerged：按头切，KV 头不够就复制
#
# `qkv_proj` 同样是合并的列并行层，但它必须按**头**切：注意力按头独立计算，一个 rank 只要拿到若干个完整的 q 头、以及这些 q 头要用的 KV 头，注意力本身就一次通信都不需要。

# %% tags=["remove-input"]
listing("minisgl/layers/linear.py", "LinearQKVMerged")

# %% [markdown]
# q 头平均分给各 rank（`div_even` 分不匀就报错）。GQA 模型的 KV 头比 q 头少：Qwen3-0.6B 有 16 个 q 头、8 个 KV 头，每 2 个 q 头共用一个 KV 头（q 头 `i` 用 KV 头 `i // 2`）。TP=2 时每个 rank 8 个 q 头、4 个 KV 头，刚好配套。TP=16 时每个 rank 只有 1 个 q 头，而 KV 头只有 8 个，不够分——`div_even(8, 16, allow_replicate=True)` 返回 1：每个 rank 放 1 个 KV 头，每个 KV 头**复制**到 2 个 rank 上。rank `r` 的 q 头是 `r`，它要的 KV 头是 `r // 2`，于是 rank 0 和 rank 1 各存一份 KV 头 0。复制浪费一些显存（KV 池里每个 KV 头存了两份），但保住了“注意力不通信”。层本身只决定本地有几个头；本地放的是**哪个** KV 头，由第 3 章的权重切分决定。下面在 meta 上把 16 个 rank 的 `qkv_proj` 都建出来：

# %%
h, d = qwen3["hidden_size"], qwen3["head_dim"]
nq, nkv = qwen3["num_attention_heads"], qwen3["num_key_value_heads"]
for tp in (2, 16):
    pairs = []
    for r in range(tp):
        set_tp_info(r, tp)
        with torch.device("meta"):
            qkv = LinearQKVMerged(h, d, nq, nkv)
        q_heads = list(range(r * qkv.local_qo_heads, (r + 1) * qkv.local_qo_heads))
        kv_heads = sorted({i // (nq // nkv) for i in q_heads})  # 它们用的 KV 头
        assert len(kv_heads) == qkv.local_kv_heads

        def span(xs):
            return f"{xs[0]}–{xs[-1]}" if len(xs) > 1 else f"{xs[0]}"
        pairs.append(f"r{r}:q{span(q_heads)}/kv{span(kv_heads)}")
    set_tp_info(0, 1)
    lq, lkv = qkv.local_qo_heads, qkv.local_kv_heads
    print(f"TP={tp}：每个 rank {lq} 个 q 头、{lkv} 个 KV 头，"
          f"qkv_proj.weight {list(qkv.weight.shape)} = ({lq} + 2×{lkv})×{d} 行")
    for i in range(0, len(pairs), 8):
        print("   " + "  ".join(pairs[i:i + 8]))
assert list(qkv.weight.shape) == [384, 1024]

# %% [markdown]
# TP=16 那一行里，`r0` 和 `r1` 都存着 KV 头 0，`r2` 和 `r3` 都存着 KV 头 1……这就是“复制”。再往上到 TP=32，连 q 头都不够分了，`div_even(16, 32)` 直接报错：q 头不能复制，复制了就是两个 rank 算同一份输出。
#
# ### 行并行：部分和相加，bias 只加一次
#
# 行并行按输入维切：rank `r` 只拿到输入的第 `r` 段 `x_r`，乘上权重的第 `r` 段列 `W_r`，得到的 `x_r @ W_rᵀ` 形状已经是完整的 `[T, out]`，但只是**部分和**——`y = Σ_r x_r @ W_rᵀ`，要把所有 rank 的加起来才对。这个“加起来、每个 rank 都拿到总和”就是 all-reduce。

# %% tags=["remove-input"]
listing("minisgl/layers/linear.py", "LinearRowParallel")

# %% [markdown]
# 三个细节。其一，只有 `tp_size > 1` 才通信：单卡时根本不碰 `torch.distributed`，不用初始化任何进程组。其二，bias 每个 rank 都存一份完整的，但只在求和**之后**加一次；要是交给 `F.linear` 顺手加上，all-reduce 之后 bias 就被加了 `tp` 次。其三，行并行的输入从哪来：它正好是前面列并行层的输出。MLP 里 `gate_up_proj` 列并行，rank `r` 得到中间激活的第 `r` 段，`silu_and_mul` 逐元素、各算各的，`down_proj` 行并行恰好吃进这一段——整个 MLP 只在最后通信一次。
#
# 注意力的输出投影 `o_proj` 也是行并行：注意力层输出的是本 rank 那几个 q 头的结果拼起来（`[T, 本地 q 头 × head_dim]`），也就是 `o_proj` 输入维的第 `r` 段。它就是 `LinearRowParallel` 换个名字：

# %% tags=["remove-input"]
listing("minisgl/layers/linear.py", "LinearOProj")

# %% [markdown]
# 下面在一个进程里模拟两个 rank 跑一个带 bias 的行并行层。两个 rank 必须**同时**进入 all-reduce（谁也不能先拿到总和），所以这里借用 main 的 `ThreadComm`：每个 rank 一个线程，通信时在栅栏处等齐。

# %%
from examples.ch02_layers import ThreadComm

from minisgl.distributed import DistributedCommunicator

gen = torch.Generator().manual_seed(3)
W = torch.randn(4, 6, generator=gen)  # [out, in]
b = torch.randn(4, generator=gen)
x = torch.randn(3, 6, generator=gen)
full = x @ W.T + b  # 不切分的结果
TP, per = 2, 3  # 输入维 6 切成两段，每段 3


def seg(t, r):  # 第 r 段列（输入维）
    return t[:, r * per:(r + 1) * per]


layers = []
for r in range(TP):
    set_tp_info(r, TP)  # 建层之前登记；层在 __init__ 里据此只分配 [4, 6/TP]
    layer = LinearRowParallel(6, 4, has_bias=True)
    layer.load_state_dict({"weight": seg(W, r), "bias": b})  # bias 每个 rank 一份
    layers.append(layer)
set_tp_info(0, 1)

comm = ThreadComm(TP)
saved = DistributedCommunicator.plugins
DistributedCommunicator.plugins = [*saved, comm]  # 层用的是最后一个插件
try:
    # rank r 只拿到输入的第 r 段
    outs = comm.run(lambda r: layers[r].forward(seg(x, r)))
finally:
    DistributedCommunicator.plugins = saved

partials = [comm.sent[r][0][1] for r in range(TP)]  # 交给 all_reduce 的部分和
for r in range(TP):
    alone = (partials[r] + b - full).abs().max().item()
    print(f"rank {r}：weight {list(layers[r].weight.shape)}，"
          f"输入 {list(seg(x, r).shape)}，"
          f"部分和 {list(partials[r].shape)}，单看它与结果差 {alone:.2f}")
assert torch.allclose(partials[0] + partials[1] + b, full, atol=1e-5)
print("部分和相加再加一次 bias：与不切分的结果一致（最大差 < 1e-5）")
twice = (partials[0] + b + partials[1] + b - full).abs().max().item()
print(f"若每个 rank 各加一次 bias：差 {twice:.2f}，"
      f"正好是 max|b| = {b.abs().max().item():.2f}")
# 每个 rank 只通信一次；all-reduce 之后两个 rank 拿到同样的正确结果
assert all(len(s) == 1 and s[0][0] == "all_reduce" for s in comm.sent)
assert all(torch.allclose(o, full, atol=1e-5) for o in outs)
assert not torch.allclose(partials[0] + partials[1] + 2 * b, full, atol=1e-3)

# %% [markdown]
# ### 每个 rank 存多大：SmolLM2 与 Qwen3-0.6B
#
# 把本章的五个层按两个模型的真实尺寸、在几个 TP 规模下建出来（在 meta 上，rank 0 的视角），每个 rank 的权重形状（`out×in`）如下。表格是这个单元现算出来的，不是抄的：

# %%
from IPython.display import Markdown

smol = json.loads((smollm2() / "config.json").read_text(encoding="utf-8"))


def rank_shapes(c, tp):
    h, d, inter = c["hidden_size"], c["head_dim"], c["intermediate_size"]
    nq, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    makers = {
        "qkv_proj": lambda: LinearQKVMerged(h, d, nq, nkv),
        "o_proj": lambda: LinearOProj(nq * d, h),
        "gate_up_proj": lambda: LinearColParallelMerged(h, [inter, inter]),
        "down_proj": lambda: LinearRowParallel(inter, h),
        "embed_tokens": lambda: VocabParallelEmbedding(c["vocab_size"], h),
    }
    set_tp_info(0, tp)
    cells, per_layer = {}, 0
    try:
        for name, make in makers.items():
            try:
                with torch.device("meta"):
                    w = make().weight
                cells[name] = "×".join(map(str, w.shape))  # [out, in] 写成 out×in
                per_layer += w.numel() if name != "embed_tokens" else 0
            except ValueError:
                cells[name] = "切不开"
    finally:
        set_tp_info(0, 1)
    ok = "切不开" not in cells.values()
    cells["一层线性权重"] = f"{per_layer / 1e6:.2f}M" if ok else "—"
    return cells


columns = ["模型", "TP", *rank_shapes(smol, 1)]
table = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
results = {}
for label, c, tps in [("SmolLM2", smol, (1, 2, 3)),
                      ("Qwen3-0.6B", qwen3, (1, 2, 16))]:
    for tp in tps:
        results[label, tp] = cells = rank_shapes(c, tp)
        table.append(f"| {label} | {tp} | " + " | ".join(cells.values()) + " |")
assert results["Qwen3-0.6B", 16]["qkv_proj"] == "384×1024"
assert results["SmolLM2", 2]["qkv_proj"] == "切不开"
assert results["Qwen3-0.6B", 2]["embed_tokens"] == "75968×1024"
Markdown("\n".join(table))

# %% [markdown]
# 几处值得看：
#
# - **SmolLM2 切不成 TP=2。** 它有 9 个 q 头、3 个 KV 头，9 不能被 2 整除，`qkv_proj` 建不出来。`o_proj` 那一格倒是有形状：`LinearOProj` 只知道输入维是 576、只检查 576 能不能被 2 整除，可 288 列是 4.5 个头，这样切毫无意义——真正把关的是按头切的 `qkv_proj`（和注意力层），建模型时它先报错。TP=3 可以：每个 rank 3 个 q 头、1 个 KV 头，`qkv_proj` 是 `(3 + 2) × 64 = 320` 行。一个模型能用哪些 TP 规模，由头数决定，不由矩阵的尺寸决定。
# - **Qwen3-0.6B 的 `o_proj` 是 `[1024, 2048]`**，输入维 `16 × 128 = 2048` 比 `hidden_size = 1024` 还大：Qwen3 的 `head_dim` 不等于 `hidden_size / 头数`。行并行切的是它的输入维。
# - **TP=16 时 `qkv_proj` 有 384 行 = 1 个 q 头 + 1 个 k 头 + 1 个 v 头**。KV 头复制是有代价的：16 个 rank 一层合计 `1.11M × 16 ≈ 17.8M`，比单卡的 15.73M 多出约 2.1M——正好是复制出来的 8 个 k 头和 8 个 v 头（`16 × 128 × 1024`）。TP=2 时没有复制，`7.86M × 2` 就是 15.73M。
# - **行并行层的输出维、列并行层的输入维不切**：`o_proj`、`down_proj` 的第 0 维和 `qkv_proj`、`gate_up_proj` 的第 1 维始终是 `hidden_size`——每个 rank 都拿着完整的隐状态进出一个子层。

# %% [markdown]
# ## 词表并行：嵌入用 all-reduce，LM head 用 all-gather
#
# 词表很大：SmolLM2 是 49152 个词，Qwen3 是 151936 个。嵌入矩阵 `[V, H]` 按词表维（行）切，每个 rank 存连续的一段：`per = ceil(V / tp)` 行，rank `r` 负责 id `[r·per, (r+1)·per)`。除不尽时，最后一个 rank 的末尾补零行，让每个 rank 的形状都一样。

# %% tags=["remove-input"]
listing("minisgl/layers/embedding.py", "VocabParallelEmbedding")

# %% [markdown]
# 查表时，每个 rank 只认自己那段里的 id：减去起点得到本地行号，不归自己的 id 先换成 0 去查（免得越界），查完再把这些行乘 0。于是每个 token 恰好有一个 rank 给出了真正的那一行，其余 rank 给的都是 0，all-reduce 一加就是完整的嵌入。补的零行永远查不到：合法的 id 都小于 `V`。

# %%
V, E, TP = 7, 3, 2  # 词表 7 不能被 2 整除：每个 rank 4 行，rank 1 末尾补 1 行零
gen = torch.Generator().manual_seed(4)
table_w = torch.randn(V, E, generator=gen)
ids = torch.tensor([0, 3, 4, 6], dtype=torch.int32)


def vocab_piece(w, r, per):  # 词表的第 r 段行，不够 per 行就在末尾补零行
    piece = w[r * per:(r + 1) * per]
    return torch.cat([piece, piece.new_zeros(per - len(piece), w.shape[1])])


embeds = []
for r in range(TP):
    set_tp_info(r, TP)
    emb = VocabParallelEmbedding(V, E)
    emb.load_state_dict({"weight": vocab_piece(table_w, r, emb.rows_per_rank)})
    embeds.append(emb)
set_tp_info(0, 1)

comm = ThreadComm(TP)
DistributedCommunicator.plugins = [*saved, comm]
try:
    outs = comm.run(lambda r: embeds[r].forward(ids))
finally:
    DistributedCommunicator.plugins = saved
for r in range(TP):
    contrib = comm.sent[r][0][1]
    start = embeds[r].vocab_start
    marks = "，".join(f"id {i}→{'真行' if row.abs().sum() > 0 else '0'}"
                     for i, row in zip(ids.tolist(), contrib))
    end = start + embeds[r].rows_per_rank
    print(f"rank {r} 负责 id [{start}, {end})：{marks}")
assert all(torch.equal(o, table_w[ids.long()]) for o in outs)
print("all-reduce 之后两个 rank 都得到完整的嵌入，与直接查整张表逐位相同")

# %% [markdown]
# ### ParallelLMHead：只算每个请求的最后一个 token
#
# LM head 把最后的隐状态乘回词表：`logits = x @ Wᵀ`，`W` 是 `[V, H]`。SmolLM2 和 Qwen3-0.6B 都让它和嵌入层**共享权重**（`tie_word_embeddings`），`tied_embedding` 不为空时，LM head 删掉自己的 `weight`，直接用嵌入层的——共享的权重只属于嵌入层，`state_dict` 里只出现一次。

# %% tags=["remove-input"]
listing("minisgl/layers/embedding.py", "ParallelLMHead.forward")

# %% [markdown]
# 第一件事是挑行。prefill 时一个请求送进来很多 token，但下一个 token 只从**最后一个位置**的 logits 里采样，前面那些位置的 logits 没有用。所以先按 `cumsum(extend_len) - 1` 挑出每个请求的最后一个 token，再乘词表矩阵：输出是 `[请求数, V]`，而不是 `[token 数, V]`。decode 时每个请求本来就只有 1 个 token，不用挑。（只有少数功能要所有位置的 logits，例如返回提示词每个位置的 logprob、投机解码的校验；它们另走一条路，见练习 3。）

# %%
from minisgl.layers import ParallelLMHead

head = ParallelLMHead(V, E)
head.weight = table_w
hidden = torch.randn(6, E, generator=gen)
prefill = make_batch([3, 1, 2])  # 三个请求，这一步分别算 3、1、2 个 token
with ctx.forward_batch(prefill):
    logits = head.forward(hidden)
last = (torch.cumsum(torch.tensor([3, 1, 2]), 0) - 1).tolist()
print(f"prefill：6 个 token → 取第 {last} 行 → {list(logits.shape)}", logits.dtype)
assert last == [2, 3, 5] and torch.allclose(logits, hidden[last] @ table_w.T)

# %% [markdown]
# 这一步省下的不是小数目。LM head 是整个模型里最大的一次矩阵乘之一：每个 token 要做 `2·H·V` 次浮点运算，而且输出是 float32 的 `[行数, V]`。下面按两个模型的真实尺寸算一算：一个 token 的 LM head 占整个前向矩阵乘的多少（不算注意力分数），以及一个 prefill 批（8 个请求、每个 1024 个 token）如果保留所有位置，logits 要多大：

# %%
def lm_head_numbers(c, num_reqs=8, tokens_per_req=1024):
    h, d, inter = c["hidden_size"], c["head_dim"], c["intermediate_size"]
    nq, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    vocab, layers = c["vocab_size"], c["num_hidden_layers"]
    # 一层线性权重的元素数：qkv + o + gate_up + down
    per_layer = h * (nq + 2 * nkv) * d + nq * d * h + 2 * inter * h + inter * h
    body, head_flops = 2 * per_layer * layers, 2 * h * vocab  # 每个 token 的 FLOPs
    T = num_reqs * tokens_per_req
    return dict(body=body, head=head_flops, share=head_flops / (body + head_flops),
                full_gb=T * vocab * 4 / 1e9, full_tflop=T * head_flops / 1e12,
                last_mb=num_reqs * vocab * 4 / 1e6,
                last_gflop=num_reqs * head_flops / 1e9)


header = ["模型", "每 token：各层矩阵乘", "每 token：LM head", "LM head 占比",
          "8×1024 个 token 全算：logits / 算力", "只算 8 个最后 token"]
rows_md = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
nums = {}
for label, c in [("SmolLM2-135M", smol), ("Qwen3-0.6B", qwen3)]:
    n = nums[label] = lm_head_numbers(c)
    cols = [label, f"{n['body'] / 1e6:.0f} MFLOP", f"{n['head'] / 1e6:.0f} MFLOP",
            f"{n['share']:.0%}",
            f"{n['full_gb']:.2f} GB / {n['full_tflop']:.2f} TFLOP",
            f"{n['last_mb']:.1f} MB / {n['last_gflop']:.1f} GFLOP"]
    rows_md.append("| " + " | ".join(cols) + " |")
assert 0.2 < nums["SmolLM2-135M"]["share"] < 0.22
assert 0.25 < nums["Qwen3-0.6B"]["share"] < 0.27
Markdown("\n".join(rows_md))

# %% [markdown]
# 小模型的词表相对隐藏维特别大：SmolLM2 每个 token 的 LM head 占了全部矩阵乘的五分之一，Qwen3-0.6B 占四分之一强。一个 8192 token 的 prefill 批如果保留所有位置，Qwen3-0.6B 的 logits 就要约 5 GB 显存、白算 2.5 TFLOP；只算最后一个 token，是 4.9 MB 和 2.5 GFLOP，差了一千倍。
#
# ### 张量并行下：all-gather 各段词表，再切掉补的零
#
# TP>1 时每个 rank 只有自己那段词表，算出的是 `[R, per]` 的一段 logits。采样要完整的分布，所以用 all-gather 把各段拼起来。`all_gather` 沿第 0 维按 rank 顺序叠：得到 `[tp·R, per]`，前 `R` 行是 rank 0 的（词 `[0, per)`），后 `R` 行是 rank 1 的……要变成每行一个请求，得先 `view(tp, R, per)`，把 rank 这一维换到中间（`permute(1, 0, 2)`），再合成 `[R, tp·per]`；最后 `tp·per` 可能比 `V` 多出几列补零行算出的 0，切掉。和嵌入层对比：嵌入层各 rank 的结果**相加**（all-reduce），LM head 各 rank 的结果**拼接**（all-gather）。
#
# 下面让 logits 的值一眼能看出它属于哪个请求、哪个词：隐藏维取 1，词 `v` 的权重就是 `v`，两个 decode 请求的隐状态是 1 和 10，于是 `logits[i, v] = hidden[i] × v`。

# %%
labels = torch.arange(V, dtype=torch.float32)[:, None]  # [V, 1]：词 v 的权重就是 v
heads = []
for r in range(TP):
    set_tp_info(r, TP)
    hd = ParallelLMHead(V, 1)
    hd.load_state_dict({"weight": vocab_piece(labels, r, hd.rows_per_rank)})
    heads.append(hd)
set_tp_info(0, 1)

comm = ThreadComm(TP)
DistributedCommunicator.plugins = [*saved, comm]
decode = make_batch([1, 1], phase="decode")  # 两个请求，各 1 个 token
hid = torch.tensor([[1.0], [10.0]])
try:
    # 两个“rank”线程读同一个全局上下文里的同一个批次
    with ctx.forward_batch(decode):
        outs = comm.run(lambda r: heads[r].forward(hid))
finally:
    DistributedCommunicator.plugins = saved
local = [comm.sent[r][0][1] for r in range(TP)]
gathered = torch.cat(local)  # all_gather 的原始结果
print("rank 0 的一段：", local[0].int().tolist())
print("rank 1 的一段：", local[1].int().tolist())
print("all_gather 叠起来 [tp·R, per]：", gathered.int().tolist())
print("直接 view(R, -1)（错）：      ", gathered.view(2, -1).int().tolist())
print("重排并切掉补零 → [R, V]：     ", outs[0].int().tolist())
assert torch.equal(outs[0], hid * labels.T) and torch.equal(outs[0], outs[1])

# %% [markdown]
# 直接 `view(R, -1)` 的那一行，第 0 个“请求”拿到的是 rank 0 给两个请求算的 logits，完全串了行；只有 `R = 1` 时两种写法才碰巧一样（上游对 `R = 1` 走了一条不用重排的快捷路径）。最后一列补零行算出的 0 也在重排后被切掉了。
#
# ## AttentionLayer：切开 qkv，归一化、旋转，交给后端
#
# 最后一个积木是注意力层。它负责“投影之后、输出投影之前”的那段，而且只做**每个 token 自己就能完成**的部分：

# %% tags=["remove-input"]
listing("minisgl/layers/attention.py", "AttentionLayer")

# %% [markdown]
# 按本地头数把 `qkv` 切成 q、k、v（`[T, 本地头数, head_dim]`）；Qwen3 的 q、k 先按头做一次 RMSNorm（`q_norm`、`k_norm` 的权重是 `[head_dim]`，所有头共用）；然后按 `ctx.batch.positions` 做 RoPE；最后把 `softmax(QKᵀ)V` 交给 `ctx.attn_backend`。真正的注意力要读写 KV 池、要知道每个请求缓存了多长、要用分页的页表，这些都是第 5 章注意力后端的事，层不关心——它和第 1 章的 `Context` 一样，靠全局上下文拿到当前批次和后端。v 既不归一化也不旋转。
#
# q/k 归一化必须在 RoPE **之前**，这是 Qwen3 训练时的顺序。有意思的是：旋转不改变向量的长度，所以如果 `q_norm` 的权重全是 1，两种顺序的结果完全一样；真实的权重逐维不同，先旋转再乘权重，就把本该乘在第 `i` 维上的系数乘到了旋转后混合过的坐标上。下面用一个只记录输入的假后端验证层的顺序：

# %%
class Recording:
    def forward(self, q, k, v, layer_id, batch):
        self.seen = (q, k, v)
        return v.repeat_interleave(q.shape[1] // k.shape[1], dim=1)  # 形状对就行


Dh, nq_, nkv_ = 8, 4, 2
rope8 = RotaryEmbedding(Dh, Dh, 64, 10000.0)
q_norm, k_norm = RMSNorm(Dh, 1e-6), RMSNorm(Dh, 1e-6)
q_norm.weight = 1 + torch.randn(Dh, generator=gen)  # 逐维不同的权重
k_norm.weight = 1 + torch.randn(Dh, generator=gen)
attn = AttentionLayer(0, nq_, nkv_, Dh, rope8, q_norm, k_norm)
qkv = torch.randn(5, (nq_ + 2 * nkv_) * Dh, generator=gen)
ctx.attn_backend = rec = Recording()
with ctx.forward_batch(make_batch([3, 2])):
    out = attn.forward(qkv)
pos = make_batch([3, 2]).positions
parts = qkv.split([nq_ * Dh, nkv_ * Dh, nkv_ * Dh], dim=-1)
raw_q, raw_k, raw_v = (t.reshape(5, -1, Dh) for t in parts)
norm_then_rope = rope8.forward(pos, q_norm.forward(raw_q), k_norm.forward(raw_k))[0]
rope_then_norm = q_norm.forward(rope8.forward(pos, raw_q, raw_k)[0])
sq, sk, sv = (list(t.shape) for t in rec.seen)
print(f"后端收到 q {sq}、k {sk}、v {sv}；层输出 {list(out.shape)}")
assert torch.equal(rec.seen[0], norm_then_rope) and torch.equal(rec.seen[2], raw_v)
print(f"后端收到的 q 与“先归一化再 RoPE”逐位相同，与“先 RoPE 再归一化”差 "
      f"{(rec.seen[0] - rope_then_norm).abs().max().item():.2f}；v 原样未动")
ones = RMSNorm(Dh, 1e-6)
ones.weight = torch.ones(Dh)  # 权重全是 1 时两种顺序一样：RMS 在旋转下不变
a = rope8.forward(pos, ones.forward(raw_q), raw_k)[0]
b_ = ones.forward(rope8.forward(pos, raw_q, raw_k)[0])
assert torch.allclose(a, b_, atol=1e-5)
print("换成全 1 的权重：两种顺序的结果一致（最大差 < 1e-5）")
ctx.attn_backend = CausalAttention()

# %% [markdown]
# 张量并行下，注意力层看到的头数已经是本地的（构造时传入全模型的头数，层自己用 `div_even` 算出本地的），后端只算本 rank 那几个头，输出 `[T, 本地 q 头 × head_dim]` 正好是行并行的 `o_proj` 要的那一段输入。注意力这一步本身没有任何通信。

# %% [markdown]
# ## 运行
#
# 把本章的 main 跑一遍（输出就是在本章的树里真实跑出来的）：

# %%
run("python examples/ch02_layers.py")

# %% [markdown]
# 值得注意的地方：
#
# - **第一节**：七个权重全在 `meta` 上；`qkv_proj` 的 960 行是 `(9 + 3 + 3) × 64`。`load_state_dict` 之后权重到了 `cpu`——是整个换掉的。形状不对的那次报错说清了是哪个键、应该是什么、收到了什么。最后两行就是上面表格里 SmolLM2 “切不开”的原因。
# - **第二节**：逐个算子的形状里，只有 `qkv_proj`（960）和 `gate_up_proj`（3072 = 2 × 1536）把宽度撑大，`silu_and_mul` 把 3072 折回 1536，其余都是 `[5, 576]`。“第二个残差确实是 x + o_proj 的输出”一行验证了残差被挪进了 `post_attention_layernorm`；RoPE 那一行三个点积相同，因为三对位置都相差 2。
# - **第三节**：玩具尺寸下两个 rank 的权重形状——`qkv_proj`、`gate_up_proj` 切输出维（行数减半），`down_proj` 切输入维（列数减半），`embed_tokens` 的 11 行词表切成每个 rank 6 行，rank 1 末尾补了 1 行零。
# - **第四节**：把两个 rank 的 `qkv_proj` 输出直接首尾相接，和完整的 `[q|k|v]` 差了 16——顺序是 `[q₀ k₀ v₀ | q₁ k₁ v₁]`，不是 `[q₀ q₁ | k₀ k₁ | v₀ v₁]`；按 q、k、v 分段后再拼才对上。这正说明每个 rank 拿到的是自己那几个**完整的头**。
# - **第五节**：两个 rank 的部分和单看都和结果差得很远（44、194），相加就对上；整个 MLP 只通信了一次。
# - **第六节**：rank 0 只对 id 0、5 给出真行，rank 1 只对 id 6、10 给出真行；LM head 从 3 个 token 里挑出第 1、2 行（两个请求的最后一个 token），all-gather 得到 `[4, 6]`，重排成 `[2, 12]`，切掉补零的 1 列得到 `[2, 11]`。

# %% [markdown]
# ## 与官方的差异
#
# 层的名字、构造参数、切法和上游 mini-sglang 一致（读完本书去读上游，`LinearQKVMerged`、`ParallelLMHead` 都是老相识），差别集中在三处：内核、出错时的行为、以及为了“在单进程里讲清楚”做的调整。
#
# - **没有 GPU 内核。** 上游的 `RMSNorm` / `RMSNormFused` 调 flashinfer 的 `rmsnorm` 和 `fused_add_rmsnorm`，后者是**原地**的：`x` 被改写成归一化结果、`residual` 被改写成新的残差；RoPE 调 flashinfer 的 `apply_rope_with_cos_sin_cache_inplace`（也是原地，且只支持 64/128/256/512 的 head_dim），cos 和 sin 拼成一张 `_cos_sin_cache`；`silu_and_mul` 也来自 flashinfer；嵌入查表用 `minisgl.kernel` 里自写的 `indexing` 内核，一次完成“减起点、越界置零”。我们全部用 PyTorch 写、不改输入，CPU 上就能跑，也好和 Hugging Face 逐位对照。
# - **BaseOP 的报错。** 上游 `load_state_dict` 一边遍历属性一边从字典里 `pop` 键，形状和 dtype 用 `assert` 检查，多出来的键最后抛 `RuntimeError`——出错时前面的权重已经换掉了一部分。我们先全部核对，错了抛 `ValueError` 并列出缺了、多了哪些键，一个都不换。上游还有一个 `StateLessOP` 子类（RoPE、注意力层用它），以及为 MoE 专家权重准备的特殊分支（把 `experts.N.` 的各个张量 `stack` 起来）；我们没有权重的层就是没有张量属性，MoE 留到后面的章节。上游 `OPList` 的列表属性叫 `op_list`，我们叫 `ops`。
# - **RoPE 表与 meta 设备。** 上游的 `get_rope` 发现默认设备是 meta 时会报错，要求先调用 `set_rope_device()`，然后直接在那个设备上建表；我们总在 CPU 上用 float32 建表，第一次前向时搬到 q 所在的设备。上游还支持 `rope_scaling`（`llama3`、`yarn`，通过改写 `inv_freq`），本书的两个模型都用不到，我们没有实现。
# - **AttentionLayer。** 上游的注意力层自己按 `rotary_config` 调 `get_rope`，还支持滑动窗口和自定义 `softmax_scale`，q/k 归一化在视图上原地做；我们由外面把 RoPE 传进来，没有滑动窗口。
# - **线性层。** 上游的 `_LinearTPImpl` 还记着完整与本地的输入、输出大小，没有 bias 时 `self.bias = None`；`LinearOProj` 是一个单独的类，前向和 `LinearRowParallel` 写了两遍。我们让 `LinearOProj` 直接继承 `LinearRowParallel`。
# - **LM head。** 上游的 `ParallelLMHead` 多一个 `tie_word_embeddings` 参数，共享权重时重写 `state_dict` / `load_state_dict`，把文件里的 `lm_head.*` 丢掉；每个请求最后一个 token 的下标来自注意力后端算好的元数据（`batch.attn_metadata.get_last_indices`），只有一个请求时跳过重排；可选 bias。我们在第 2 章还没有注意力元数据，直接用 `extend_len` 的前缀和；共享权重时删掉自己的 `weight`。
# - **distributed。** 上游的 `set_tp_info` 只能调用一次（再调抛“TP info has been set”），`get_tp_info` 在没登记时报错；还有一套 EP（专家并行）信息。我们允许反复登记——单进程模拟多个 rank 正需要这一点——没登记过就当单卡。上游的 `DistributedImpl` 还有 `broadcast`，并有一个 PyNCCL 插件（第 16 章）。
#
# ### 官方实现
#
# 上游仓库 `sgl-project/mini-sglang`：
#
# - 基类：`python/minisgl/layers/base.py` · `BaseOP`、`StateLessOP`、`OPList`
# - 归一化：`python/minisgl/layers/norm.py` · `RMSNorm`、`RMSNormFused`（flashinfer 的 `rmsnorm` / `fused_add_rmsnorm`）
# - RoPE：`python/minisgl/layers/rotary.py` · `RotaryEmbedding`、`get_rope`、`set_rope_device`
# - 激活：`python/minisgl/layers/activation.py` · `silu_and_mul`
# - 线性层：`python/minisgl/layers/linear.py` · `LinearReplicated`、`LinearColParallelMerged`、`LinearQKVMerged`、`LinearOProj`、`LinearRowParallel`
# - 词表层：`python/minisgl/layers/embedding.py` · `VocabParallelEmbedding`、`ParallelLMHead`
# - 注意力层：`python/minisgl/layers/attention.py` · `AttentionLayer.forward`
# - TP 信息与通信：`python/minisgl/distributed/info.py` · `set_tp_info`、`get_tp_info`；`python/minisgl/distributed/impl.py` · `DistributedCommunicator`、`TorchDistributedImpl`、`PyNCCLDistributedImpl`

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch02_layers.py`，不需要真模型。RMSNorm 和 RoPE 直接和 transformers 里 Llama 的实现对照（RoPE 的位置是打乱的 `[17, 3, 250, 0, 4095, 3, 1000]`，还覆盖了 `rotary_dim < head_dim`）；其余的层在模拟的 TP=1、2、4（以及 16）下和不切分的计算对照。模拟方式和 main 一样：每个 rank 一个线程，建层前 `set_tp_info`，权重从完整的随机权重里切出来。挑三个看。
#
# 第一个检查 `qkv_proj` 按头切时，每个 rank 的 q 头配上的是**正确的** KV 头：每个 rank 用自己那份 q、k、v 做 GQA 注意力，结果必须等于完整注意力输出里属于自己那几个头的那一段。参数里有 `(16, 8, 16)`——Qwen3-0.6B 的头数在 TP=16 下，KV 头复制——还有 `(8, 1, 2)`，一个 KV 头复制给两个 rank。

# %% tags=["remove-input"]
listing("tests/test_ch02_layers.py", "test_qkv_merged_heads_pair_with_the_right_kv_head")

# %% [markdown]
# 第二个是行并行：两种行并行层、带与不带 bias，每个 rank 只拿到输入的一段；all-reduce 之后每个 rank 的输出都等于完整结果，每个 rank 只通信一次，单看一份部分和不是结果，部分和相加再加一次 bias 才是。

# %% tags=["remove-input"]
listing("tests/test_ch02_layers.py", "test_row_parallel_partial_sums_add_up")

# %% [markdown]
# 第三个检查 LM head 挑行：prefill 时一个请求命中了前缀缓存、这一步只算 2 个 token，挑出的仍是每个请求这一步的最后一个 token；decode 时所有行都保留。

# %% tags=["remove-input"]
listing("tests/test_ch02_layers.py", "test_lm_head_keeps_last_token_per_request_in_prefill_and_all_rows_in_decode")

# %% [markdown]
# 其余测试覆盖 `BaseOP` 的键名、前缀、meta 上的赋值、四种坏输入（缺键、多键、形状、dtype）都报错且一个张量都不换；`RMSNormFused` 先加残差、bf16 下和 HF 一致；RoPE 的相对位置性质和 `get_rope` 的缓存；合并列并行层的各段拼回完整输出；单卡时层一次都不调用通信；词表层的掩码（每个 id 恰好一个 rank 负责）和 LM head 的 all-gather（含词表除不尽、最后一个 rank 全是补零行的 `(9, 4)`）；注意力层“先切、再归一化、再 RoPE、v 不动”的顺序。在本章的树里跑全部：

# %%
run("python -m pytest -q --color=no tests/test_ch02_layers.py")

# %% [markdown]
# ## 怎么讲清楚
#
# 推理引擎的层不继承 `nn.Module`：推理用不到 autograd、hook 和 train 模式，我们只要两件事——按 HF 的名字导出权重，以及在 meta 设备上先搭架子、再把流式读进来的真权重**赋值**进去（`nn.Module` 的 `copy_` 对 meta 参数是空操作）。一个解码层里：RMSNorm 在 float32 里算，残差的加法推迟到下一个归一化里、和归一化融合成一个内核，和 `x = x + f(norm(x))` 逐位等价；RoPE 按每个 token 自己的位置查 cos/sin 表，因为一批里的 token 来自不同请求，表是算出来的缓存，得在真设备上建；gate/up、q/k/v 各自合并成一次矩阵乘。张量并行按 Megatron 的切法：qkv 和 gate_up 列并行（按头、按中间维切输出，不通信），o_proj 和 down_proj 行并行（切输入，部分和 all-reduce，bias 求和后加一次），所以每层只有两次 all-reduce；合并的层要先各自切再拼，否则 rank 0 拿到整个 gate；KV 头比 rank 少时每个 rank 复制一个 KV 头。词表按行切：嵌入层各 rank 只查自己那段、不归自己的置零，all-reduce 相加；LM head 先只挑每个请求最后一个 token（Qwen3-0.6B 上这一步占每 token 矩阵乘的四分之一，全算要多花上千倍），各 rank 算自己那段词表的 logits，all-gather 拼接、重排、切掉补的零。

# %% [markdown]
# ## 练习
#
# 1. **bias 的另一种放法**。`LinearRowParallel` 在 all-reduce 之后加 bias。有的实现不这么做，而是让 `F.linear(x, W, b if rank == 0 else None)`，在 all-reduce 之前加。这样对吗？和我们的写法比，各有什么好处？如果改成每个 rank 都加 `b / tp` 呢？
# 2. **Qwen3-0.6B 在 TP=4 和 TP=8**。写出每个 rank 的 `qkv_proj`、`o_proj`、`gate_up_proj`、`down_proj`、`embed_tokens` 的形状，以及 rank 3 存的是哪几个 q 头、哪几个 KV 头。TP=16 时，整个系统的 KV 池里每个 token 的 K/V 占多少字节（bf16、28 层），是单卡的几倍？
# 3. **要所有位置的 logits 时**。有个功能要返回提示词每个位置的 logprob。对 Qwen3-0.6B、一个 32768 token 的提示，全算 logits 需要多少显存？不改模型，怎样把这件事做得不爆显存？
# 4. **部分旋转**。有的模型只对每个头的前一部分维度做 RoPE（`rotary_dim < head_dim`）。这时 `θᵢ` 的公式里分母用 `rotary_dim` 还是 `head_dim`？我们的 `RotaryEmbedding` 是怎么处理剩下那几维的？
#
# ??? success "参考答案"
#
#     1. 对。all-reduce 把各 rank 的结果相加，只有 rank 0 带着 `b`，总和里恰好有一个 `b`。好处是把 bias 的加法融进了矩阵乘（`F.linear` 一次完成），少一次逐元素的读写；代价是各 rank 的层不再对称，要按 rank 分支。我们的写法在求和之后统一加一次，每个 rank 的代码一样，也更好讲清楚。每个 rank 加 `b / tp` 数学上也对，但多了除法和几次加法的舍入，结果和“求和后加一次”不再逐位一致，而且 `b / tp` 还得在加载时另算一份。
#     2. TP=4：每个 rank 4 个 q 头、2 个 KV 头，`qkv_proj` `[(4+2×2)×128, 1024] = [1024, 1024]`，`o_proj` `[1024, 512]`，`gate_up_proj` `[1536, 1024]`，`down_proj` `[1024, 768]`，`embed_tokens` `[37984, 1024]`；rank 3 的 q 头是 12–15，KV 头是 6–7。TP=8：2 个 q 头、1 个 KV 头，`qkv_proj` `[512, 1024]`，`o_proj` `[1024, 256]`，`gate_up_proj` `[768, 1024]`，`down_proj` `[1024, 384]`，`embed_tokens` `[18992, 1024]`；rank 3 的 q 头是 6–7，KV 头是 3。TP=16：每个 rank 存 1 个 KV 头，每个 token 每层 K 和 V 各 `128 × 2` 字节，16 个 rank、28 层合计 `16 × 2 × 256 × 28 = 229376` 字节；单卡是 8 个 KV 头：`8 × 2 × 256 × 28 = 114688` 字节——正好 2 倍，多出来的就是复制的那一份。
#     3. `32768 × 151936 × 4` 字节约 19.9 GB（float32）。不必一次算完：把这一步的隐状态（`[32768, 1024]`，128 MiB）按几千行一块地乘 LM head，每块算完立刻做 `log_softmax` 并取出实际下一个 token 的那一列，只留 `[块大小]` 个数，再算下一块。峰值显存只取决于块大小。这正是 LM head 默认只算最后一个 token 的原因：需要全部位置的功能另走一条路，而不是让每次 prefill 都付这个代价。
#     4. 用 `rotary_dim`：旋转只发生在前 `rotary_dim` 维里，它们被看成 `rotary_dim / 2` 对，频率 `θᵢ = base^(-2i / rotary_dim)`，`i < rotary_dim / 2`（HF 也是这样）。`RotaryEmbedding._rotate` 把 `x` 切成 `rot = x[..., :rotary_dim]` 和 `rest = x[..., rotary_dim:]`，只旋转 `rot`（对 `rot` 自己做“旋转一半”，配对是 `(i, i + rotary_dim/2)`），再原样接上 `rest`。测试 `test_rope_partial_rotary_dim_leaves_the_rest_alone` 检查的正是这两点。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与独立的参考实现比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 6    # 把第 6 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 6     # 判题
# python practice/judge.py hint 6     # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - `BaseOP`：权重是普通张量属性、子层是普通属性，`state_dict` 的键就是 HF 的名字；`load_state_dict` 先全部核对、再**赋值**，meta 上的架子因此能换上真权重；下划线开头的属性不是权重；`OPList` 的子层叫 `0`、`1`……
# - `RMSNorm` 在 float32 里算；`RMSNormFused(x, residual)` 把残差加法推迟到下一个归一化，返回 `(norm(x + r), x + r)`，与 `x = x + f(norm(x))` 逐位等价，最后靠 `model.norm` 把最后一次加法补上。
# - RoPE 是“旋转一半”的复数乘法，按每个 token 自己的位置查表；cos/sin 表在 CPU 上用 float32 建（哪怕在 meta 上建模型），不进 `state_dict`，全模型共用一份。
# - gate/up、q/k/v 各合并成一次矩阵乘；张量并行下先各自切、再拼。`qkv_proj` 按头切，KV 头不够分时每个 rank 复制一个。
# - 列并行切输出、不通信；行并行切输入、部分和 all-reduce、bias 求和后加一次；MLP 和注意力都是“先列后行”，每层两次 all-reduce。
# - 词表按行切、除不尽就补零：嵌入层掩码后 all-reduce 相加；LM head 只算每个请求最后一个 token，all-gather 后重排、切掉补零，输出 `[请求数, V]`。
# - 注意力层只做切分、q/k 归一化（在 RoPE 之前）和 RoPE，真正的注意力交给第 5 章的后端。
