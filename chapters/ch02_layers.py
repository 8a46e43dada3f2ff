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
# 第 1 章记好了请求和批次的账，这一章写模型的积木：一个解码层里用到的每种算子。每个算子的数学只有一两行，难点在推理引擎对它们的要求：先在 [meta 设备](../glossary.md#meta-device)上搭好架子再换真权重，一批里的 token 位置各不相同，线性层和词表层一开始就要能按[张量并行](../glossary.md#tensor-parallel)（TP）切开。本章写出 `minisgl/layers/`，并在一个进程里用两个线程扮演两个 [rank](../glossary.md#rank)，让你看到切开算出的结果加起来、拼起来都等于单卡。

# %% tags=["remove-cell"]
from minibook.page import *
_ = setup(2)  # 赋值而不显示：返回的树路径随机器而变

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 在 meta 设备上建好的模型，为什么不能用 `nn.Module.load_state_dict` 装权重？
# 2. 一个 decode 批里三个请求的位置是 `[17, 3, 250]`，RoPE 为什么不能用 `arange(3)` 当位置？
# 3. TP=2 时，`gate_up_proj` 在 rank 0 上的本地权重由哪几块组成？直接把合并好的 `[2I, H]` 切成两半会怎样？
# 4. 行并行层的 bias 为什么在 all-reduce 之后才加？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 它往已有参数里 `copy_`，往 meta 张量里拷贝什么也不做，只给一条警告。`BaseOP.load_state_dict` 是把新张量整个赋值给属性。
#     2. 一批里的 token 来自不同请求，位置是各自序列里的位置；用 `arange(3)` 旋转角度全错，而且不报错。
#     3. gate 的第 0 段叠上 up 的第 0 段，本地输出前一半是 gate、后一半是 up。先拼再切，rank 0 拿到整个 gate，形状全对、结果全错。
#     4. all-reduce 把各 rank 的结果相加；每个 rank 都带着 bias，求和后 bias 就被加了 tp 次。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章新建 `minisgl/layers/` 下的 8 个文件。`minisgl/distributed/` 的 3 个文件是提前引入的：线性层建好就要知道“我是第几个 rank”，前向时要调 [all-reduce](../glossary.md#all-reduce) / [all-gather](../glossary.md#all-gather)；多进程的部分是计划中的第 16 章（张量并行）要讲的。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch02_layers.py`：前一半按 SmolLM2 的尺寸在 meta 上搭一个解码层、换上随机权重、让 5 个 token 流过去；后一半用两个线程模拟 TP=2，看列并行、行并行、词表并行各存什么、算出什么。`python tools/steps.py check 2` 会搭出本章的树、跑这个 main 和本章的测试（本章只新建文件，前几章的测试不重跑）；只跑这一个 main：
#
# ```bash
# python tools/steps.py run 2 -- python examples/ch02_layers.py
# ```
#
# 模拟 TP 靠一个通信插件：层只认 `DistributedCommunicator`，它把调用转给 `plugins` 里的最后一个实现。把 `ThreadComm` 追加进去，层的代码一行不改，就能在线程之间“通信”：

# %% tags=["remove-input"]
listing("examples/ch02_layers.py", "ThreadComm")

# %% [markdown]
# ## 一张图：通信只发生在三种位置
#
# ![一个解码层的数据流：嵌入层、两个带残差的 RMSNorm、列并行的 qkv_proj 和 gate_up_proj、注意力层、行并行的 o_proj 和 down_proj、LM head；右侧是 Qwen3-0.6B 在 TP=2 时一个 rank 上的张量形状，红色标出三处通信](../assets/ch02_layer_flow.svg)
#
# 蓝色是[列并行](../glossary.md#column-row-parallel)（切输出，不通信），橙色是行并行（切输入，部分和要 all-reduce），绿色是[词表并行](../glossary.md#vocab-parallel)。列并行的输出正好是下一个行并行要的那段输入，所以每层只有 `o_proj`、`down_proj` 之后两次 all-reduce。
#
# ??? note "深入：怎么读这张图"
#
#     从上往下读。左边那条紫色竖线是**残差流**：它只在三个 `RMSNormFused` 里被读写，每个子层的输出都先“挂”着，等到下一个归一化再加回去（下面一节细讲）。中间的方块是本章的层，颜色表示它们在张量并行下的切法：蓝色是**列并行**（按输出维切，各 rank 算出输出的一段，不用通信），橙色是**行并行**（按输入维切，各 rank 算出完整形状的部分和，要 all-reduce），绿色是**词表并行**，灰色是每个 token、每个头各算各的、根本不需要切的部分。右边是 Qwen3-0.6B 在 TP=2 时**一个 rank** 上的张量形状，`T` 是这一步的 token 数，`R` 是请求数。
#
#     红色的通信只有三种位置：嵌入层之后一次 all-reduce，每个解码层两次 all-reduce（`o_proj` 和 `down_proj` 之后），LM head 之后一次 all-gather。列并行的输出正好是下一个行并行需要的那一段输入，中间的注意力（按头独立）和 `silu_and_mul`（逐元素）都不需要任何通信——这就是 Megatron 式切法的全部奥秘，本章的线性层从一开始就按它来写。

# %% [markdown]
# ## BaseOP：装权重是赋值，不是拷贝
#
# 我们要先在 meta 设备上把模型搭个架子（只有形状、没有内存），再把从文件流式读出的权重一块块装进去。[`BaseOP`](../glossary.md#baseop) 只做两件事：按属性名导出权重、按名字把新张量**赋值**给属性。

# %% tags=["remove-input"]
listing("minisgl/layers/base.py", "BaseOP")

# %% [markdown]
# 权重是张量属性，子层是 `BaseOP` 属性，`state_dict` 的键按属性名拼成 `model.layers.0.self_attn.qkv_proj.weight`，和 Hugging Face 一致；下划线开头的属性（`_cos`、`_comm`、`_attn`）不算权重。`OPList` 把子层命名为 `0`、`1`……
#
# ??? note "深入：nn.Module 在推理里的三处别扭"
#
#     训练框架里，层都继承 `torch.nn.Module`。推理引擎用它却有三处别扭。第一，`Module` 的很多机制是为训练服务的：`Parameter` 默认 `requires_grad=True`，前向时 autograd 要记计算图（得处处记着包一层 `no_grad` / `inference_mode`）；每次 `__call__` 都要检查有没有注册 hook；还有 `train()` / `eval()` 的状态切换。推理一样都用不上。第二，参数存在 `_parameters` 这个私有字典里，靠 `__getattr__` 兜底查找，每次读 `self.weight` 都多绕一圈。第三，也是最要紧的：我们要先在 meta 设备上把模型“搭个架子”（只记形状、不分配内存，几 GB 的模型一瞬间建好），再把从文件里流式读出的权重一块块装进去。`Module.load_state_dict` 是往已有的参数里 `copy_`，往 meta 张量里拷贝是个空操作。
#
#     规则只有几条，都写在 `named_children` 里：
#
#     - **权重就是普通的张量属性，子层就是普通的 `BaseOP` 属性。** `state_dict` 按属性名一层层拼出键：`model` 下的 `layers` 下的 `0` 下的 `self_attn` 下的 `qkv_proj` 的 `weight`，就是 `model.layers.0.self_attn.qkv_proj.weight`——和 Hugging Face 的权重名一致（唯一的例外是 q/k/v 合并成 `qkv_proj`、gate/up 合并成 `gate_up_proj`，由第 3 章的加载器在读文件时合并）。
#     - **下划线开头的属性不是权重。** RoPE 的 cos/sin 表（`_cos`、`_sin`）、通信器（`_comm`）、借来用的子层（`_attn`）都用下划线开头，`state_dict` 看不见它们，也就不会要求从文件里加载。`eps`、`head_dim` 这样的非张量属性也不算。
#     - **装入是赋值，不是拷贝。** `load_state_dict` 先把所有键、形状、dtype 全部核对一遍，有一处不对就报错，而且报错时一个张量都没换；全部对上之后，再用 `setattr` 把新张量挂到对应的属性上。meta 上的空壳就这样被整个换掉。
#
#     `OPList` 是唯一的容器：它把子层命名为 `"0"`、`"1"`……，对应 HF 的 `model.layers.0`、`model.layers.1`。

# %% tags=["remove-input"]
listing("minisgl/layers/base.py", "OPList")

# %% [markdown]
# 下面用本章的层拼一个 Qwen3-0.6B 尺寸的两层小模型（在 meta 上不花内存），看 `state_dict` 的键：

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
# meta 上建模型不花内存，28 层全建出来也一样：

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
# 换上真权重：装进去的就是传进去的那个张量。作为对照，`nn.Linear` 在 meta 上建好后用 `load_state_dict` 装权重——不报错，参数还在 meta 上：

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
# `BaseOP` 的权重是普通张量，前向不记计算图：

# %%
x = torch.randn(2, 4)
print("nn.Linear 的输出：grad_fn =", torch.nn.Linear(4, 3)(x).grad_fn.name())
row = LinearRowParallel(4, 3)
row.weight = torch.randn(3, 4)
print("BaseOP 的输出：grad_fn =", row.forward(x).grad_fn)
assert row.forward(x).grad_fn is None

# %% [markdown]
# ## RMSNorm：平方和要在 float32 里算
#
# [RMSNorm](../glossary.md#rmsnorm) 是 `x / sqrt(mean(x²) + eps) * weight`。先看直接用 fp16 算会怎样：一行里有 4 个 300 的离群值，`300² = 90000` 超过了 fp16 的上限 65504：

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
# 平方和一溢出，整行被除成 0。所以 `rms_norm` 先转 float32 算，算完再转回；乘 `weight` 的时机照 Hugging Face，float32 下和它逐位相同：

# %% tags=["remove-input"]
listing("minisgl/layers/norm.py", "rms_norm")

# %% [markdown]
# ??? note "深入：fp16 溢出、bf16 舍入，以及乘 weight 的时机"
#
#     平方和求均值都先转成 float32 再算，算完再转回输入的 dtype。推理常用 bf16 / fp16：fp16 能表示的最大数是 65504，而隐状态里偶尔会有几百的“离群值”，`300² = 90000` 直接溢出成 `inf`，整行被除成 0；bf16 不会溢出，但只有 8 位有效位，几百个平方相加的舍入误差很大。乘 `weight` 的时机（先转回、再乘）照抄 Hugging Face，这样 float32 下和 HF 逐位相同，低精度下也和 HF 舍入得一样。

# %% [markdown]
# ### 残差加法挪进了下一个归一化
#
# 子层的输出不立刻加回残差，而是连同残差一起交给下一个 `RMSNormFused`，由它先加再归一化，返回 `(norm(x + r), x + r)`。这样加法和归一化只读一遍隐状态，GPU 上合成一个内核：

# %% tags=["remove-input"]
listing("minisgl/layers/norm.py", "RMSNormFused")

# %% [markdown]
# 下面用同一批层对象按两种写法各算一遍：融合写法 `Model.forward`，和教科书的 `x = x + f(norm(x))`。
#
# ??? note "深入：一层里残差怎么流"
#
#     教科书上的 pre-norm 解码层是这样写的：
#
#     ```text
#     x = x + attn(input_layernorm(x))
#     x = x + mlp(post_attention_layernorm(x))
#     ```
#
#     每个子层的输出立刻加回残差流。可是紧跟在“加回残差”之后的，永远是下一个归一化（下一个子层的、或者最后的 `model.norm`）：先读 `x` 和子层输出、写出它们的和，再读一遍这个和去做归一化。把这两步合成一步，只读一遍、写两样东西（归一化的结果和新的残差），就省下一次对整个隐状态的读写——GPU 上由一个融合内核完成（上游用 flashinfer 的 `fused_add_rmsnorm`）。为此接口改成 `forward(x, residual) -> (normed, residual)`：
#
#     于是子层的输出不再自己加回去，而是原样交给下一个 `RMSNormFused`，连同一路带过来的 `residual`。一层里的数据流变成：
#
#     | 调用 | 传入 `x` | 传入 `residual` | 返回的 `normed` | 返回的 `residual` |
#     | --- | --- | --- | --- | --- |
#     | 第 0 层 `input_layernorm` | `e`（嵌入） | `None` | `norm(e)` | `e` |
#     | 第 0 层 `post_attention_layernorm` | `a₀`（注意力输出） | `e` | `norm(e + a₀)` | `e + a₀` |
#     | 第 1 层 `input_layernorm` | `m₀`（MLP 输出） | `e + a₀` | `norm(e + a₀ + m₀)` | `e + a₀ + m₀` |
#     | …… | | | | |
#     | `model.norm` | 最后一层的 MLP 输出 | 残差流 | 交给 LM head | 不再用 |
#
#     每一行的 `normed` 都和教科书写法里那个归一化的输入一模一样，只是“加”被推迟了半步。第 0 层的 `input_layernorm` 还没有残差流，`residual=None` 时残差就是 `x` 本身；最后一层的 MLP 输出要靠 `model.norm` 加回去——忘了这一步，最后一层 MLP 的贡献就丢了。最容易犯的错是把 `normed` 当成新的残差交回去：形状全对，不报错，残差流从此被“归一化”，模型输出面目全非。
#
#     用上面那个两层的小模型验证一遍：`Model.forward` 用的是融合的写法，下面再按教科书的写法手算一遍，用的是同一批层对象。

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
# 逐位相同：两种写法做的是同一串浮点加法，只是换了个地方做。
#
# ??? note "深入：为什么是逐位相同而不只是近似"
#
#     逐位相同，不是“差不多”：两种写法做的是同一串浮点运算，只是 `a + r` 和 `r + a` 的区别，而浮点加法满足交换律。（结合律就不满足了：如果融合写法改成先把两个子层的输出加在一起、再加残差，结果就只能近似相等。）

# %% [markdown]
# ## RoPE：每个 token 按自己的位置旋转
#
# [RoPE](../glossary.md#rope) 把 q、k 每一对坐标转 `p·θᵢ` 角，`θᵢ = base^(-2i/D)`，于是位置 `m` 的 q 和位置 `n` 的 k 的点积只取决于 `m − n`。一批里的 token 来自不同请求：decode 时三个请求各送 1 个 token，位置可能是 `[17, 3, 250]`。下面拿一个 float64 复数参照，比较按真位置旋转和误用 `arange(3)`：

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
# 误用 `arange(3)` 不报错，只是角度全错。所以 `RotaryEmbedding` 预先算好一张按位置索引的 cos/sin 表，前向时按 `positions` 取行：

# %% tags=["remove-input"]
listing("minisgl/layers/rotary.py", "RotaryEmbedding")

# %% [markdown]
# ??? note "深入：旋转一半与相邻配对"
#
#     哪两维算一对有两种约定。我们用的是“旋转一半”（rotate-half，也叫 neox 风格）：第 `i` 维和第 `i + D/2` 维是一对，和 Hugging Face 的 Llama、Qwen3 一致；原始 Meta Llama 代码用的是相邻两维 `(2i, 2i+1)` 一对。约定用错不会报错，只会让模型输出胡话——权重是按哪种约定训练的，就只能用哪种。`_rotate` 里的两行正是复数乘法 `(x₁ + i·x₂)(cos + i·sin)` 的实部和虚部。`rotary_dim < head_dim` 时只旋转前 `rotary_dim` 维，其余原样保留（有的模型只旋转一部分维度）。
#
# 这张表是算出来的缓存，不从文件加载。模型在 `with torch.device("meta")` 里建，没指定设备的张量都会落在 meta 上，表若也在那儿就永远没有数据；所以它显式建在 CPU 上：

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
# 表不进 `state_dict`，`get_rope` 按参数缓存，全模型共用一份。
#
# ??? note "深入：meta 上下文与 RoPE 表的大小"
#
#     那张表为什么写明 `device="cpu"`？模型是在 `with torch.device("meta"):` 里建的，这个上下文会把所有**没指定设备**的张量都建到 meta 上。权重建在 meta 上没关系，稍后会被文件里的真权重换掉；可 cos/sin 表是算出来的，不会从任何文件加载——它要是也建在 meta 上，就永远只有形状没有数。所以它显式在 CPU 上、用 float32 算好。它不随 `load_state_dict` 上卡，由加载模型的一方（第 6 章的 Engine）在权重加载完后调 `rope_tables_to(device)` 整张搬过去一次。不在前向里顺手搬：GPU 上那是第一步里一次从可换页内存出发的同步拷贝（`examples/gpu_smoke.py` 在 H200 上数出过这 2 次同步），到了第 18 章的图捕获里更是不许的；所以前向只 `assert` 表和 q 在同一个设备上。表用下划线开头，不进 `state_dict`；`get_rope` 把算过的表存在一个字典里，同样参数的表全模型只算一份，所有层共用，`rope_tables_to` 也正是从这个字典里找到它们。
#
#     Qwen3-0.6B 的 `max_position_embeddings` 是 40960，`head_dim = 128`，表是 `40960 × 64` 的 cos 加同样大的 sin，20 MiB；28 层共用这一份。
#
# ## silu_and_mul：gate 和 up 合成一次矩阵乘
#
# Llama 和 Qwen3 的 MLP 是 [SwiGLU](../glossary.md#swiglu)：`down(silu(gate(x)) * up(x))`。gate 和 up 输入相同，把两块权重叠成一个 `[2I, H]` 的 `gate_up_proj`，一次矩阵乘算出两样；约定输出前一半是 gate、后一半是 up。q、k、v 同理合成 `qkv_proj`（[合并的线性层](../glossary.md#merged-linear)）。

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
# ## 列并行与行并行：线性层一开始就写成 TP 的形态
#
# 切 `y = x @ W.T`（`W` 是 `[out, in]`）只有两种切法：
#
# | 切法 | 切 `W` 的哪一维 | 每个 rank 得到 | 通信 | 本章的层 |
# | --- | --- | --- | --- | --- |
# | 列并行 | 第 0 维（输出维） | 输出的一段 `[T, out/tp]` | 不需要 | `LinearQKVMerged`、`LinearColParallelMerged` |
# | 行并行 | 第 1 维（输入维） | 完整形状的部分和 `[T, out]` | all-reduce | `LinearRowParallel`、`LinearOProj` |
# | 不切 | — | 完整输出 | 不需要 | `LinearReplicated` |
#
# ![切权重的三种情形：合并的 gate_up 先各自切再拼（正确）与先拼再切（错误）；Qwen3-0.6B 在 TP=16 时 q 头与复制的 KV 头；行并行的部分和经 all-reduce 相加、bias 只加一次](../assets/ch02_tp_split.svg)
#
# 每个层在 `__init__` 里读一次 `get_tp_info()`，只分配本地那份权重；没登记过就是单卡 `(0, 1)`，层退化成普通线性层。单进程模拟时，建每个 rank 的层之前先 `set_tp_info(rank, size)`：

# %% tags=["remove-input"]
listing("minisgl/distributed/info.py", "set_tp_info")

# %% tags=["remove-input"]
listing("minisgl/distributed/info.py", "get_tp_info")

# %% [markdown]
# ??? note "深入：列、行的名字为什么容易搞反；单进程里怎么模拟多个 rank"
#
#     名字来自数学上的 `y = xA`（`A = Wᵀ`）：“列并行”切的是 `A` 的列，也就是 `W` 的**行**。
#
#     真正的 TP 里每个 rank 是一个进程，启动时登记一次自己的位置（计划中的第 16 章）。在一个进程里模拟时，我们在**建每个 rank 的层之前**换着登记：`set_tp_info(0, 2)` 建 rank 0 的层，`set_tp_info(1, 2)` 建 rank 1 的层，建完回到 `(0, 1)`。层只在 `__init__` 里读它，建好之后就和全局状态无关了。
#
# 所有线性层共用一个基类，本地权重是 `[local_out, local_in]`：

# %% tags=["remove-input"]
listing("minisgl/layers/linear.py", "_LinearTPImpl")

# %% [markdown]
# ### 合并的层：先各自切，再拼
#
# `LinearColParallelMerged` 的本地输出是每个投影各自除以 tp 再相加，rank `r` 的权重是“gate 的第 `r` 段”叠上“up 的第 `r` 段”：

# %% tags=["remove-input"]
listing("minisgl/layers/linear.py", "LinearColParallelMerged")

# %% [markdown]
# 两种切法都能建出形状一样的层，下面看各 rank 的激活和单卡的对应段差多少：

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
# 先拼再切时，rank 0 拿到的是整个 gate：形状全对，结果全错。第 3 章的加载器因此先切再拼。

# %% [markdown]
# ### qkv 按头切，KV 头不够就复制
#
# 注意力按头独立计算，所以 `qkv_proj` 按头切：每个 rank 拿若干个完整的 q 头和它们要用的 KV 头，注意力本身不通信。本地 KV 头数只在 `local_kv_heads` 一处计算（[本地 KV 头](../glossary.md#local-kv-heads)），层、权重切分、KV 池都调它：

# %% tags=["remove-input"]
listing("minisgl/distributed/info.py", "local_kv_heads")

# %% tags=["remove-input"]
listing("minisgl/layers/linear.py", "LinearQKVMerged")

# %% [markdown]
# Qwen3-0.6B 有 16 个 q 头、8 个 KV 头（[GQA](../glossary.md#gqa)，q 头 `i` 用 KV 头 `i // 2`）。在 meta 上建出 TP=2 和 TP=16 时每个 rank 的 `qkv_proj`：

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
# TP=16 时 8 个 KV 头不够 16 个 rank 分，每个 rank 放 1 个，`r0` 和 `r1` 都存着 KV 头 0。复制多占一些内存，换来注意力不通信；q 头不能复制，TP=32 时 `div_even(16, 32)` 直接报错。
#
# ??? note "深入：KV 头复制的细节"
#
#     q 头平均分给各 rank（`div_even` 分不匀就报错）。GQA 模型的 KV 头比 q 头少：Qwen3-0.6B 有 16 个 q 头、8 个 KV 头，每 2 个 q 头共用一个 KV 头（q 头 `i` 用 KV 头 `i // 2`）。TP=2 时每个 rank 8 个 q 头、4 个 KV 头，刚好配套。TP=16 时每个 rank 只有 1 个 q 头，而 KV 头只有 8 个，不够分——`local_kv_heads(8, 16)` 返回 1：每个 rank 放 1 个 KV 头，每个 KV 头**复制**到 2 个 rank 上。rank `r` 的 q 头是 `r`，它要的 KV 头是 `r // 2`，于是 rank 0 和 rank 1 各存一份 KV 头 0。复制浪费一些显存（KV 池里每个 KV 头存了两份），但保住了“注意力不通信”。层本身只决定本地有几个头；本地放的是**哪个** KV 头，由第 3 章的权重切分决定。
#
# ### 行并行：部分和相加，bias 只加一次
#
# rank `r` 只拿到输入的第 `r` 段，算出的 `[T, out]` 只是部分和，all-reduce 相加才是结果。单卡时不通信，也不碰 `torch.distributed`：

# %% tags=["remove-input"]
listing("minisgl/layers/linear.py", "LinearRowParallel")

# %% [markdown]
# `o_proj` 就是换了名字的行并行层：注意力输出的本地那几个头，正好是它输入维的第 `r` 段。
#
# ??? note "深入：行并行的三个细节"
#
#     三个细节。其一，只有 `tp_size > 1` 才通信：单卡时根本不碰 `torch.distributed`，不用初始化任何进程组。其二，bias 每个 rank 都存一份完整的，但只在求和**之后**加一次；要是交给 `F.linear` 顺手加上，all-reduce 之后 bias 就被加了 `tp` 次。其三，行并行的输入从哪来：它正好是前面列并行层的输出。MLP 里 `gate_up_proj` 列并行，rank `r` 得到中间激活的第 `r` 段，`silu_and_mul` 逐元素、各算各的，`down_proj` 行并行恰好吃进这一段——整个 MLP 只在最后通信一次。
#
# 两个 rank 必须同时进入 all-reduce，所以用 `ThreadComm` 让两个线程跑一个带 bias 的行并行层：

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
# 单看一份部分和差得很远，相加再加一次 bias 才对；每个 rank 各加一次，就多出一个 `b`。
#
# ### 每个 rank 存多大：头数决定能切几份
#
# 按两个模型的真实尺寸、在几个 TP 规模下建出五种层（rank 0 的视角），表格是现算的：

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
# SmolLM2 有 9 个 q 头，切不成 TP=2，只能 1 或 3：一个模型能用哪些 TP 规模，由头数决定。
#
# ??? note "深入：这张表里还能读出什么"
#
#     - **SmolLM2 切不成 TP=2。** 它有 9 个 q 头、3 个 KV 头，9 不能被 2 整除，`qkv_proj` 建不出来。`o_proj` 那一格倒是有形状：`LinearOProj` 只知道输入维是 576、只检查 576 能不能被 2 整除，可 288 列是 4.5 个头，这样切毫无意义——真正把关的是按头切的 `qkv_proj`（和注意力层），建模型时它先报错。TP=3 可以：每个 rank 3 个 q 头、1 个 KV 头，`qkv_proj` 是 `(3 + 2) × 64 = 320` 行。一个模型能用哪些 TP 规模，由头数决定，不由矩阵的尺寸决定。
#     - **Qwen3-0.6B 的 `o_proj` 是 `[1024, 2048]`**，输入维 `16 × 128 = 2048` 比 `hidden_size = 1024` 还大：Qwen3 的 `head_dim` 不等于 `hidden_size / 头数`。行并行切的是它的输入维。
#     - **TP=16 时 `qkv_proj` 有 384 行 = 1 个 q 头 + 1 个 k 头 + 1 个 v 头**。KV 头复制是有代价的：16 个 rank 一层合计 `1.11M × 16 ≈ 17.8M`，比单卡的 15.73M 多出约 2.1M——正好是复制出来的 8 个 k 头和 8 个 v 头（`16 × 128 × 1024`）。TP=2 时没有复制，`7.86M × 2` 就是 15.73M。
#     - **行并行层的输出维、列并行层的输入维不切**：`o_proj`、`down_proj` 的第 0 维和 `qkv_proj`、`gate_up_proj` 的第 1 维始终是 `hidden_size`——每个 rank 都拿着完整的隐状态进出一个子层。

# %% [markdown]
# ## 词表并行：嵌入相加，LM head 拼接
#
# 词表很大（Qwen3 是 151936），嵌入矩阵 `[V, H]` 按行切，每个 rank 存连续的 `ceil(V / tp)` 行，除不尽时最后一个 rank 补零行。查表时只认自己那段里的 id，其余输出 0，all-reduce 一加就是完整的嵌入：

# %% tags=["remove-input"]
listing("minisgl/layers/embedding.py", "VocabParallelEmbedding")

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
# ??? note "深入：掩码怎么保证每个 id 恰好一个 rank 负责"
#
#     查表时，每个 rank 只认自己那段里的 id：减去起点得到本地行号，不归自己的 id 先换成 0 去查（免得越界），查完再把这些行乘 0。于是每个 token 恰好有一个 rank 给出了真正的那一行，其余 rank 给的都是 0，all-reduce 一加就是完整的嵌入。补的零行永远查不到：合法的 id 都小于 `V`。

# %% [markdown]
# ### LM head 只算每个请求的最后一个 token
#
# prefill 时一个请求送进来很多 token，下一个 token 只从最后一个位置的 [logits](../glossary.md#logits) 里采样。先量一量全算的代价：一个 token 的 [LM head](../glossary.md#lm-head) 占整个前向矩阵乘的多少，以及 8 个请求、每个 1024 token 的 prefill 全算要多少：

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
# ??? note "深入：这张表怎么读"
#
#     这一步省下的不是小数目。LM head 是整个模型里最大的一次矩阵乘之一：每个 token 要做 `2·H·V` 次浮点运算，而且输出是 float32 的 `[行数, V]`。
#
#     小模型的词表相对隐藏维特别大：SmolLM2 每个 token 的 LM head 占了全部矩阵乘的五分之一，Qwen3-0.6B 占四分之一强。一个 8192 token 的 prefill 批如果保留所有位置，Qwen3-0.6B 的 logits 就要约 5 GB 显存、白算 2.5 TFLOP；只算最后一个 token，是 4.9 MB 和 2.5 GFLOP，差了一千倍。

# %% [markdown]
# Qwen3-0.6B 全算要约 5 GB logits，只算最后一个 token 差了一千倍。所以 `ParallelLMHead` 先按 `extend_len` 的前缀和挑出每个请求的最后一行，再乘词表；[共享嵌入](../glossary.md#tied-embeddings)时直接用嵌入层的权重：

# %% tags=["remove-input"]
listing("minisgl/layers/embedding.py", "ParallelLMHead.forward")

# %% [markdown]
# 行号在 CPU 上算好，交给第 1 章的 `to_device`：在 GPU 上它先放进[锁页内存](../glossary.md#pinned-memory)再 `non_blocking` 拷过去，CPU 不必等这次拷贝。
#
# ??? note "深入：为什么行号要走锁页内存"
#
#     从普通（可换页）内存拷到 GPU，CUDA 得先把数据搬进一块锁页的中转区，这一步是同步的：CPU 要等拷贝结束才能去发下一个算子。直接从锁页内存出发、`non_blocking=True`，拷贝排进流里就返回，CPU 接着发 `x[rows]` 和矩阵乘，GPU 按流里的顺序执行，不会读到没拷完的行号。PyTorch 的锁页分配器会等这次拷贝完成后才回收那块内存，所以临时建的锁页张量可以放心丢掉。目标是 CPU 时，`to_device` 就是一句 `torch.as_tensor`，不碰锁页内存。

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
# TP>1 时每个 rank 只有自己那段词表，all-gather 按 rank 叠成 `[tp·R, per]`，要重排成每行一个请求，再切掉补零那几列。让 `logits[i, v] = hidden[i] × v`，一眼看出直接 `view` 错在哪：

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
# 直接 `view(R, -1)`，第 0 个请求拿到的是 rank 0 给两个请求算的 logits，串了行。
#
# ??? note "深入：all-gather 之后的重排"
#
#     TP>1 时每个 rank 只有自己那段词表，算出的是 `[R, per]` 的一段 logits。采样要完整的分布，所以用 all-gather 把各段拼起来。`all_gather` 沿第 0 维按 rank 顺序叠：得到 `[tp·R, per]`，前 `R` 行是 rank 0 的（词 `[0, per)`），后 `R` 行是 rank 1 的……要变成每行一个请求，得先 `view(tp, R, per)`，把 rank 这一维换到中间（`permute(1, 0, 2)`），再合成 `[R, tp·per]`；最后 `tp·per` 可能比 `V` 多出几列补零行算出的 0，切掉。和嵌入层对比：嵌入层各 rank 的结果**相加**（all-reduce），LM head 各 rank 的结果**拼接**（all-gather）。
#
#     直接 `view(R, -1)` 的那一行，第 0 个“请求”拿到的是 rank 0 给两个请求算的 logits，完全串了行；只有 `R = 1` 时两种写法才碰巧一样（上游对 `R = 1` 走了一条不用重排的快捷路径）。最后一列补零行算出的 0 也在重排后被切掉了。
#
# ## AttentionLayer：切开 qkv，先归一化再旋转
#
# 注意力层只做每个 token 自己就能完成的部分：按本地头数切开 qkv，Qwen3 的 q、k 先按头 RMSNorm，再 RoPE，然后把 `softmax(QKᵀ)V` 交给 `ctx.attn_backend`（[注意力后端](../glossary.md#attention-backend)）：

# %% tags=["remove-input"]
listing("minisgl/layers/attention.py", "AttentionLayer")

# %% [markdown]
# 归一化必须在 RoPE 之前。用一个只记录输入的假后端，比较后端收到的 q 和两种顺序：

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
# ??? note "深入：为什么权重全是 1 时两种顺序一样"
#
#     q/k 归一化必须在 RoPE **之前**，这是 Qwen3 训练时的顺序。有意思的是：旋转不改变向量的长度，所以如果 `q_norm` 的权重全是 1，两种顺序的结果完全一样；真实的权重逐维不同，先旋转再乘权重，就把本该乘在第 `i` 维上的系数乘到了旋转后混合过的坐标上。
#
#     张量并行下，注意力层看到的头数已经是本地的（构造时传入全模型的头数，层自己算出本地的），后端只算本 rank 那几个头，输出 `[T, 本地 q 头 × head_dim]` 正好是行并行的 `o_proj` 要的那一段输入。注意力这一步本身没有任何通信。

# %% [markdown]
# ## 运行
#
# 把本章的 main 跑一遍：

# %%
run("python examples/ch02_layers.py")

# %% [markdown]
# 值得注意：
#
# - 第一节 `qkv_proj` 的 960 行是 `(9 + 3 + 3) × 64`；`load_state_dict` 之后权重从 `meta` 到了 `cpu`。
# - 第四节把两个 rank 的 qkv 输出直接首尾相接，和完整的 `[q|k|v]` 差 16：每个 rank 拿的是自己那几个完整的头。
# - 第五节两份部分和单看差 44 和 194，相加就对上，整个 MLP 只通信一次。
# - 第六节 LM head 从 3 个 token 里挑出第 1、2 行，all-gather 得 `[4, 6]`，重排、切掉补零列得 `[2, 11]`。

# %% [markdown]
# ## 与上游的差异
#
# - 我们的 RMSNorm、RoPE、`silu_and_mul` 都用 PyTorch 写、不改输入，[上游](../glossary.md#upstream)调 flashinfer 的原地内核（`layers/norm.py` · `RMSNormFused`），因为 CPU 上要能跑、能和 HF 逐位对照。
# - 我们的 `load_state_dict` 先全部核对、出错一个都不换，上游边 `pop` 边赋值、用 `assert` 检查（`layers/base.py` · `BaseOP`），因为装到一半的模型最难查。
# - 我们总在 CPU 上建 RoPE 表、首次前向再搬走，上游要求先调 `set_rope_device`（`layers/rotary.py` · `get_rope`），因为这样建模型不必知道设备。
# - 我们的 LM head 用 `extend_len` 的前缀和挑行，上游读注意力元数据的 `get_last_indices`（`layers/embedding.py` · `ParallelLMHead`），因为本章还没有注意力后端。
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 算子的基类和装权重：`python/minisgl/layers/base.py` · `BaseOP`（第 15～53 行）、`python/minisgl/layers/base.py` · `OPList`（第 77～99 行）
# - RMSNorm，都调 flashinfer，融合版顺带加上残差：`python/minisgl/layers/norm.py` · `RMSNorm`（第 8～20 行）、`python/minisgl/layers/norm.py` · `RMSNormFused`（第 23～38 行）
# - RoPE，同样的参数只建一份：`python/minisgl/layers/rotary.py` · `RotaryEmbedding`（第 12～52 行）、`python/minisgl/layers/rotary.py` · `get_rope`（第 125～143 行）
# - 激活：`python/minisgl/layers/activation.py` · `silu_and_mul`（第 9～12 行）
# - 线性层的几种切法：`python/minisgl/layers/linear.py` · `LinearColParallelMerged`（第 56～68 行）、`python/minisgl/layers/linear.py` · `LinearQKVMerged`（第 71～88 行）、`python/minisgl/layers/linear.py` · `LinearRowParallel`（第 109～127 行）
# - 词表并行的嵌入和 LM head：`python/minisgl/layers/embedding.py` · `VocabParallelEmbedding`（第 14～42 行）、`python/minisgl/layers/embedding.py` · `ParallelLMHead`（第 45～110 行）
# - 注意力层，把计算交给后端：`python/minisgl/layers/attention.py` · `AttentionLayer`（第 18～57 行）
# - TP 信息（上游只许登记一次）和通信：`python/minisgl/distributed/info.py` · `set_tp_info`（第 21～25 行）、`python/minisgl/distributed/impl.py` · `DistributedCommunicator`（第 63～70 行）

# %% [markdown]
# ## 测试
#
# `tests/test_ch02_layers.py` 不需要真模型：RMSNorm 和 RoPE 直接对照 transformers 的 Llama 实现，其余层在模拟的 TP=1、2、4、16 下对照不切分的计算。第一个挑出的测试检查按头切时每个 rank 的 q 头配上的是正确的 KV 头，参数里有 KV 头复制的 `(16, 8, 16)`：

# %% tags=["remove-input"]
listing("tests/test_ch02_layers.py", "test_qkv_merged_heads_pair_with_the_right_kv_head")

# %% [markdown]
# 第二个检查行并行：all-reduce 之后每个 rank 都得到完整结果，每个 rank 只通信一次，bias 只加一次：

# %% tags=["remove-input"]
listing("tests/test_ch02_layers.py", "test_row_parallel_partial_sums_add_up")

# %% [markdown]
# 第三个检查 LM head 挑行：一个请求命中了前缀缓存、这一步只算 2 个 token，挑出的仍是它这一步的最后一个 token。

# %% tags=["remove-input"]
listing("tests/test_ch02_layers.py", "test_lm_head_keeps_last_token_per_request_in_prefill_and_all_rows_in_decode")

# %%
run("python -m pytest -q --color=no tests/test_ch02_layers.py")

# %% [markdown]
# ## 怎么讲清楚
#
# 推理引擎的层不继承 `nn.Module`，因为模型先在 meta 设备上搭架子，权重要整个赋值进去。张量并行只有两种切法：列并行切输出、不通信；行并行切输入、部分和 all-reduce、bias 加一次。把 qkv、gate_up 列并行，o_proj、down_proj 行并行，每层只通信两次。合并的层先各自切再拼，KV 头不够分就复制。LM head 只算每个请求最后一个 token：Qwen3-0.6B 上 8192 token 的 prefill 全算要约 5 GB logits。

# %% [markdown]
# ## 练习
#
# 1. **bias 的另一种放法**。让 `F.linear(x, W, b if rank == 0 else None)` 在 all-reduce 之前加 bias，对吗？和我们的写法比各有什么好处？
# 2. **Qwen3-0.6B 在 TP=4**。写出每个 rank 的 `qkv_proj`、`o_proj`、`gate_up_proj`、`down_proj`、`embed_tokens` 的形状，rank 3 存哪几个 q 头、哪几个 KV 头。
# 3. **部分旋转**。`rotary_dim < head_dim` 时，`θᵢ` 的分母用哪个？剩下那几维怎么处理？
# 4. **挑战：要所有位置的 logits**。有个功能要返回提示词每个位置的 logprob。对 Qwen3-0.6B、一个 32768 token 的提示，全算 logits 要多少内存？不改模型，怎样做才不爆显存？
#
# ??? success "参考答案"
#
#     1. 对：求和后恰好有一个 `b`。好处是 bias 融进了矩阵乘；代价是各 rank 的代码按 rank 分支，我们的写法每个 rank 一样。
#     2. 每个 rank 4 个 q 头、2 个 KV 头：`qkv_proj` `[1024, 1024]`、`o_proj` `[1024, 512]`、`gate_up_proj` `[1536, 1024]`、`down_proj` `[1024, 768]`、`embed_tokens` `[37984, 1024]`。rank 3 的 q 头是 12–15，KV 头是 6–7。
#     3. 用 `rotary_dim`：只有前 `rotary_dim` 维两两配对旋转。`_rotate` 把 `x` 切成 `rot` 和 `rest`，只旋转 `rot`，再原样接上 `rest`。
#     4. `32768 × 151936 × 4` 字节约 19.9 GB。把隐状态按几千行一块乘 LM head，每块立刻 `log_softmax` 并只取实际下一个 token 那一列，峰值只取决于块大小。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与独立的参考实现比较）：

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
# - `BaseOP` 的权重是普通属性，`load_state_dict` 先核对、再赋值，meta 上的架子因此能换上真权重。
# - RMSNorm 在 float32 里算；残差加法推迟到下一个 `RMSNormFused`，与教科书写法逐位相同。
# - RoPE 按每个 token 自己的位置查表；表在 CPU 上建，全模型共用。
# - 列并行切输出不通信，行并行切输入 all-reduce；合并的层先切后拼，KV 头不够分就复制。
# - 词表按行切：嵌入 all-reduce 相加，LM head 只算最后一个 token、all-gather 后重排。
