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
# # 第 3 章 模型与权重加载
#
# 第 2 章写好了积木，可引擎拿到的是一个 Hugging Face 目录：一个 `config.json` 和几个 `.safetensors` 文件。本章把它变成能跑的模型：`ModelConfig` 在入口处把配置读对、读不懂就拒绝，注册表按架构名选类，模型先在 [meta 设备](../glossary.md#meta-device)上搭好，[流式加载](../glossary.md#streaming-load)器一次读一个张量、切出本 rank 的一块、凑齐 q/k/v 再拼。做完之后，SmolLM2 和 tiny Qwen3 一批 3 个提示的 logits 与 HF 在 float32 下相差不到 1e-4，贪心生成逐 token 相同。

# %% tags=["remove-cell"]
from minibook.page import *
_ = setup(3)  # 赋值而不显示：返回的树路径随机器而变

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. Qwen3-0.6B 的 `hidden_size = 1024`、16 个头、`head_dim = 128`。`q_proj` 是什么形状？按 `hidden_size / 头数` 推 `head_dim` 会怎样？
# 2. transformers 5 保存的 `config.json` 顶层没有 `rope_theta`。只读顶层、缺省取 10000 的解析器会怎样？
# 3. 加载器为什么先把 q、k、v 各自按 rank 切开再拼？反过来会报错吗？
# 4. 共享嵌入的 LM head 为什么引用嵌入**层**，而不是它的 `weight` 张量？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. `[2048, 1024]`，比 `hidden_size` 宽一倍；按 64 推，加载时形状对不上。所以 `head_dim` 先读配置，没有才推。
#     2. 顶层找不到，它就悄悄用缺省的 1e4 代替 `rope_parameters` 里写的真值（Qwen3 是 1e6），不报错，长提示上越算越偏。
#     3. 每个 rank 要的是自己那几个 q 头和它们用的 KV 头。先拼再切形状一模一样，不报错，logits 却差出几十。
#     4. 加载是赋值，换掉的是嵌入层的 `weight` 属性；建模型时存下的张量还是 meta 上的空壳。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章新建 `minisgl/models/` 下的 8 个文件，不改前面的文件：`config.py`（`ModelConfig`）、`base.py`（模型接口）、`utils.py`（`GatedMLP`、`RopeAttn`）、`llama.py`、`qwen3.py`、`register.py`（注册表）、`weight.py`（`shard_tensor` 与 `load_weight`）和 `__init__.py`。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch03_models.py`：把三份 `config.json` 读成同一张表；在 meta 上建 Qwen3-0.6B，列出 TP=1、2、16 时每个 rank 的权重形状；流式加载 SmolLM2 和 tiny Qwen3，3 个提示拼成一次 prefill 与 HF 比 logits；不用 KV 缓存贪心生成，与 HF 逐 token 比。`python tools/steps.py check 3` 会搭出本章的树、跑它和本章的测试（本章只新建文件，前几章的测试不重跑）；只跑这一个 main：
#
# ```bash
# python tools/steps.py run 3 -- python examples/ch03_models.py
# ```
#
# 加载一个模型只有三步：读配置、在 meta 上建模型、把加载器交来的张量按名字赋进去：

# %% tags=["remove-input"]
listing("examples/ch03_models.py", "load_model")

# %% [markdown]
# KV 缓存要到第 4、5 章才有，main 自带一个十几行的“无缓存”注意力后端，要续写就把整个前缀再送一遍：

# %% tags=["remove-input"]
listing("examples/ch03_models.py", "NoCacheAttention")

# %% [markdown]
# ## 一张图：一个 rank 怎样拿到自己那份权重
#
# ![左：safetensors 文件里按名字排序的键，按切法着色；中：对每个键读出完整张量、按名字切出本 rank 的一块、转换 dtype，q/k/v 与 gate/up 先进缓冲、凑齐后拼接，再交出去；下：在 meta 设备上建好的模型，每个名字对应 TP=2 时 rank 0 的本地形状，load_state_dict 按名字赋值](../assets/ch03_loading.svg)
#
# 加载器按文件里的顺序一个一个读键，每个键读出、切出本 rank 的一块、转好 dtype 再交出；q/k/v、gate/up 先进缓冲，凑齐一组才拼好交出。交出的名字就是模型里的名字，`load_state_dict` 按名字赋给 meta 上的架子。
#
# ??? note "深入：按这张图走一遍"
#
#     图里是 Qwen3-0.6B 在 TP=2 时 rank 0 的视角。文件里的键按名字排序，一层 11 个；加载器按这个顺序一个一个读（①），每读一个就走一遍中间那条流水线（②）：读出完整张量，按**模块名**切出本 rank 的一块，只把这一块转成目标 dtype、搬到目标设备。大多数张量切完就交出去；`q_proj`、`k_proj`、`v_proj` 和 `gate_proj`、`up_proj` 要先进缓冲区，同一层的一组凑齐了，按 q、k、v（gate、up）的顺序拼好再交出去，名字随之换成 `qkv_proj`、`gate_up_proj`。交出去的 `(名字, 张量)` 的名字正好是模型里的名字，`load_state_dict` 按名字把它们赋给 meta 上那副只有形状的架子（③）。下面按这张图从右往左讲：先讲架子（配置、注册表、模型类、参数名），再讲往里装东西的加载器。

# %% [markdown]
# ## ModelConfig：读对每个数，读不懂就拒绝
#
# `config.json` 动辄三四十个字段，引擎只要十几个。难的不是挑，而是各家写法不一、写错一个数往往不报错。先看装着的 transformers 自己写出的配置：建一个 `rope_theta = 1e6` 的 Llama 配置，`save_pretrained`，看它把这个数放在哪：

# %%
import json
import tempfile
from pathlib import Path

import torch
from transformers import LlamaConfig

from minibook.models import qwen3_06b_config, smollm2, tiny_qwen3
from minisgl.models import ModelConfig

torch.set_num_threads(1)  # 本页的张量都很小：单线程更快，在几个进程抢两个核的机器上也更稳定

folder = Path(tempfile.mkdtemp())
LlamaConfig(architectures=["LlamaForCausalLM"], rope_theta=1e6).save_pretrained(folder)
saved = json.loads((folder / "config.json").read_text(encoding="utf-8"))
print("顶层 rope_theta：", saved.get("rope_theta", "（没有）"))
print("rope_parameters：", saved.get("rope_parameters"))
naive = float(saved.get("rope_theta", 10000.0))  # 只认顶层的写法（transformers 4 的写法）
print(f"只读顶层、缺省 10000：{naive:g}；ModelConfig：{ModelConfig.from_json(folder).rope_theta:g}")
assert ModelConfig.from_json(folder).rope_theta == 1e6

# %% [markdown]
# transformers 5 把 `rope_theta` 挪进了 `rope_parameters`，只读顶层的解析器不报错，悄悄拿缺省的 1e4 去算 RoPE（本章末尾会量出这样算差多少）。所以 `ModelConfig` 两种写法都认：

# %% tags=["remove-input"]
listing("minisgl/models/config.py", "ModelConfig")

# %% tags=["remove-input"]
listing("minisgl/models/config.py", "_rope_theta")

# %% [markdown]
# 同一个 `rope_parameters` 里也可能写着缩放规则（Llama 3.1 的 `llama3`、长上下文模型的 `yarn`），MLP 也可能不是 SiLU。引擎没实现的，在入口处报错，不悄悄忽略：

# %%
for bad in (dict(rope_parameters={"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0,
                                  "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                  "original_max_position_embeddings": 8192},
                 max_position_embeddings=131072),
            dict(hidden_act="gelu")):
    LlamaConfig(architectures=["LlamaForCausalLM"], **bad).save_pretrained(folder)
    try:
        ModelConfig.from_json(folder)
        raise AssertionError("应该报错")
    except ValueError as e:
        print("报错：", e)

# %% [markdown]
# ??? note "深入：config.json 里的其他坑"
#
#     挑字段本身没什么难的，难的是各家写法不一，而写错一个数往往不报错：
#
#     | 字段 | `config.json` 里的坑 | `ModelConfig` 怎么处理 |
#     | --- | --- | --- |
#     | `head_dim` | Llama 系常常不写；Qwen3 写了 128，而 `hidden_size / 头数` 只有 64 | 有就用；没有才用 `hidden_size // num_attention_heads` |
#     | `num_kv_heads` | 没有 GQA 的老模型不写 `num_key_value_heads` | 缺省等于 q 头数 |
#     | `rope_theta` | transformers 4 写在顶层，5 写进 `rope_parameters`；JSON 不分整数和浮点（Qwen3 写 `1000000`）；太老的配置干脆不写 | 两处都找，一律 `float(...)`，缺省 10000 |
#     | `rms_norm_eps` | 一般写成 `1e-06` 这样的浮点数 | 同样 `float(...)`，类型有保证 |
#     | `tie_word_embeddings` | 不写时各家缺省不同（`LlamaConfig`、`Qwen3Config` 的缺省是 False） | 缺省 False |
#     | `attention_bias` | Llama / Qwen3 用它同时管 q、k、v、o 四个投影 | 缺省 False |
#
#     `rope_theta` 统一成 float 不是洁癖：JSON 里同一个字段一会儿是 `int` 一会儿是 `float`，配置对象里的类型就跟着飘——打印出来不一样，序列化以后发给别的进程（第 12 章）也不一样。在入口处定死一种类型，后面的代码就不必再想它。
#
#     `sliding_window`、`torch_dtype` 等字段我们没读：本书支持的两种架构都没有滑动窗口，精度由引擎的参数决定。
#
# 最要紧的一个数是 `head_dim`。Qwen3-0.6B 的配置写着 128，而 `hidden_size / 头数` 只有 64：

# %%
raw = json.loads(qwen3_06b_config().read_text(encoding="utf-8"))
q06 = ModelConfig.from_json(qwen3_06b_config())
hidden, heads_q = raw["hidden_size"], raw["num_attention_heads"]
print(f"config.json：hidden_size={hidden}，num_attention_heads={heads_q}，"
      f"head_dim={raw['head_dim']}，num_key_value_heads={raw['num_key_value_heads']}")
print(f"hidden_size // 头数 = {hidden // heads_q}，而 head_dim = {q06.head_dim}")
q_width = q06.num_qo_heads * q06.head_dim
print(f"q_proj 的输出维 = {q06.num_qo_heads} × {q06.head_dim} = {q_width}，"
      f"o_proj 的输入维也是它；hidden_size 是 {q06.hidden_size}")
theta = raw["rope_theta"]
print(f"rope_theta：JSON 里是 {theta!r}（{type(theta).__name__}），"
      f"ModelConfig 里是 {q06.rope_theta!r}")
assert q_width == 2 * q06.hidden_size and isinstance(q06.rope_theta, float)

# %% [markdown]
# Qwen3 的注意力块先升维再降维：`q_proj` 从 1024 维投到 2048 维。按 64 建模型，第一个 `q_proj` 加载时就会形状不对。缺省值和缺字段的报错：

# %%
base = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 8, "vocab_size": 100,
        "rms_norm_eps": 1e-5, "max_position_embeddings": 256}  # 能省的都省了
c = ModelConfig.from_hf(base)
print(f"缺省：num_kv_heads={c.num_kv_heads}，head_dim={c.head_dim}，rope_theta={c.rope_theta}，"
      f"tie_word_embeddings={c.tie_word_embeddings}")
for bad in ({k: v for k, v in base.items() if k != "vocab_size"},
            {**base, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}):
    try:
        ModelConfig.from_hf(bad)
        raise AssertionError("应该报错")
    except ValueError as e:
        print("报错：", e)
assert (c.num_kv_heads, c.head_dim, c.rope_theta) == (8, 8, 10000.0)

# %% [markdown]
# ## 注册表：architectures[0] 决定用哪个类
#
# `architectures` 是 transformers 保存模型时写下的类名，比如 `["Qwen3ForCausalLM"]`。加一个架构就是写一个类、在注册表里登记一行（`Registry` 来自第 1 章的 `utils/`，注意力后端和前缀缓存也用同一种表）：

# %% tags=["remove-input"]
listing("minisgl/models/register.py")

# %% [markdown]
# ??? note "深入：为什么不看 model_type 或目录名"
#
#     为什么不看 `model_type`，也不看目录名？`model_type`（`"qwen3"`）说的是配置属于哪个家族，同一个家族底下可以有因果语言模型、分类模型、奖励模型，头不一样、权重也不一样；`architectures[0]` 才是确切的类。按目录名猜（名字里有 `llama` 就当 Llama）更不可靠：`my-finetune-v2` 猜不出来，`llama-to-qwen-distill` 会猜错。
#
# 不认识的架构直接报错，并列出支持哪些：

# %%
import dataclasses

from minisgl.models import MODEL_REGISTRY, create_model

try:
    create_model(dataclasses.replace(c, architecture="MistralForCausalLM"))
    raise AssertionError("应该报错")
except ValueError as e:
    print(e)
assert set(MODEL_REGISTRY) == {"LlamaForCausalLM", "Qwen3ForCausalLM"}

# %% [markdown]
# ## Llama：两块积木搭起来
#
# Llama 的解码层只有两个子块，写成共用的积木放在 `models/utils.py`：门控 MLP（gate/up 列并行、down 行并行，整块只通信一次）和注意力块：

# %% tags=["remove-input"]
listing("minisgl/models/utils.py", "GatedMLP")

# %% tags=["remove-input"]
listing("minisgl/models/utils.py", "RopeAttn")

# %% [markdown]
# ??? note "深入：q_norm 为什么挂在 RopeAttn 上"
#
#     几个细节都和名字有关。`q_norm`、`k_norm` 挂在 `RopeAttn` 上，因为 HF 的权重名是 `model.layers.N.self_attn.q_norm.weight`；真正用它们的 `AttentionLayer` 挂在下划线开头的 `_attn` 上，`state_dict` 看不见它，同一对归一化层就只出现一次。两处引用的是**同一个层对象**，加载时换掉这个对象上的 `weight`，两边同时看到——后面的共享嵌入也靠这一点。RoPE 的 cos/sin 表由 `get_rope` 按参数缓存，全模型所有层共用一张；`attention_bias` 同时管 q、k、v、o 四个投影，和 HF 的 Llama、Qwen3 一致。
#
# 有了这两块，Llama 的三个类都很短：

# %% tags=["remove-input"]
listing("minisgl/models/llama.py", "LlamaDecoderLayer")

# %% tags=["remove-input"]
listing("minisgl/models/llama.py", "LlamaModel")

# %% tags=["remove-input"]
listing("minisgl/models/llama.py", "LlamaForCausalLM")

# %% [markdown]
# `LlamaForCausalLM.forward()` 不带参数，从 `get_global_ctx().batch` 读 `input_ids`，返回 `[请求数, 词表大小]` 的 float32 logits。
#
# ### 每层交出的不是隐状态
#
# `LlamaDecoderLayer.forward` 交出的是 `(MLP 的输出, 残差流)`：加残差被推迟到下一层的 `input_layernorm`，最后一层靠 `model.norm`。拿 transformers 每一层之后的隐状态逐层对一遍：

# %%
from transformers import AutoModelForCausalLM

from examples.ch03_models import NoCacheAttention, load_model, make_req, prefill
from minibook.hf import encode, hf_logits, quiet_transformers
from minisgl.core import Batch, Context, set_global_ctx

ctx = Context(page_size=1)
ctx.attn_backend = NoCacheAttention()
set_global_ctx(ctx)

path = tiny_qwen3()
model_config = ModelConfig.from_json(path)
model, _ = load_model(path)
ids = encode(path, "Once upon a time, there was a little")
with quiet_transformers():
    hf_model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
with torch.inference_mode():
    out = hf_model(torch.tensor([ids]), output_hidden_states=True)
hf_states = out.hidden_states  # 嵌入，加上每一层之后的隐状态


def one_prompt_batch(ids):
    req = make_req(0, ids)
    batch = Batch(reqs=[req], phase="prefill")
    batch.padded_reqs = [req]
    batch.input_ids, batch.positions = req.input_ids, torch.arange(len(ids), dtype=torch.int32)
    return batch


def rel(a, b):  # 相对误差：tiny Qwen3 的隐状态能到几百
    return ((a - b).abs().max() / b.abs().max()).item()


def shown(err):
    return "< 1e-5" if err < 1e-5 else f"{err:.1e}"


m = model.model
with ctx.forward_batch(one_prompt_batch(ids)):
    x, residual = m.embed_tokens.forward(ctx.batch.input_ids), None
    for i, layer in enumerate(m.layers):
        x, residual = layer.forward(x, residual)
        if i + 1 < len(m.layers):  # HF 最后一项是已经过 model.norm 的，下面单独比
            ref = hf_states[i + 1][0]
            e_x, e_r, e_sum = rel(x, ref), rel(residual, ref), rel(x + residual, ref)
            print(f"第 {i} 层之后：x 单独看差 {e_x:.2f}，residual 单独看差 {e_r:.2f}，"
                  f"x + residual 差 {shown(e_sum)}")
            assert e_sum < 1e-5 and e_x > 0.1 and e_r > 0.1
    final = m.norm.forward(x, residual)[0]
e_final = rel(final, hf_states[-1][0])
print(f"model.norm(x, residual) 与 HF 最后的隐状态：差 {shown(e_final)}")
assert e_final < 1e-5

# %% [markdown]
# 单独看 `x` 或 `residual` 都对不上 HF，两者之和才对上。逐层调试时只打印 `x`，会以为第 0 层就错了。
#
# ??? note "深入：残差推迟对整个模型意味着什么"
#
#     注意 `LlamaDecoderLayer.forward` 的返回值：它交出去的是 `(MLP 的输出, 残差流)`，**不是**这一层之后的隐状态。第 2 章讲过 `RMSNormFused` 把“加残差”挪进了下一个归一化；放到整个模型里看，就是每一层都把“这一层 MLP 的输出还没加回去”这件事留给下一层的 `input_layernorm`，最后一层留给 `model.norm`——所以 `LlamaModel.forward` 最后那次 `norm.forward(x, residual)` 不能省，省了就丢掉最后一层 MLP 的全部贡献。于是第 i 层之后真正的隐状态是 `x + residual`，两者单独拿出来都不是。调试的时候要是逐层打印 `x` 去和 HF 比，会以为第 0 层就错了——这是读这类引擎代码时最容易踩的坑。HF 的 `hidden_states` 最后一项已经过了 `model.norm`，所以最后一层单独和 `norm(x, residual)` 比。
#
# ### Qwen3 = Llama + q_norm / k_norm
#
# Qwen3 和 Llama 在结构上只差一处：q、k 在 RoPE 之前先按头做一次 RMSNorm。其余差别（显式 `head_dim`、`rope_theta = 1e6`）都只是配置里的数，所以 `qwen3.py` 只改三个类属性：

# %% tags=["remove-input"]
listing("minisgl/models/qwen3.py")

# %% [markdown]
# ??? note "深入：两个注意力块的数据流对照"
#
#     `LlamaDecoderLayer` 把自己的 `has_qk_norm` 传给 `RopeAttn`，`LlamaModel` 用 `decoder_layer` 这个类属性建层，`LlamaForCausalLM` 用 `model_class` 建主体——三处各留一个钩子，Qwen3 各改一个值。两个注意力块的数据流对照如下：
#
#     === "Llama 的注意力块"
#
#         ```text
#         qkv = qkv_proj(x)                  # [T, (hq + 2·hkv) · d]
#         q, k, v = split(qkv)               # [T, hq, d]、[T, hkv, d]、[T, hkv, d]
#         q, k = rope(positions, q, k)
#         o = attn_backend(q, k, v)          # [T, hq, d]
#         out = o_proj(o)                    # [T, hidden]
#         ```
#
#     === "Qwen3 的注意力块"
#
#         ```text
#         qkv = qkv_proj(x)
#         q, k, v = split(qkv)
#         q, k = q_norm(q), k_norm(k)        # 多出来的一行：每个头各自归一化，权重 [d]
#         q, k = rope(positions, q, k)
#         o = attn_backend(q, k, v)
#         out = o_proj(o)
#         ```
#
#     体现在权重上，就是每层多两个 `[head_dim]` 的张量，下面拿 tiny Qwen3 的配置在 meta 上各建一个来比。
#
# 两个模型按同一份配置建出来，`state_dict` 的差别只有每层的 `q_norm`、`k_norm`：

# %%
import difflib

shapes = {}
for arch in ("LlamaForCausalLM", "Qwen3ForCausalLM"):
    with torch.device("meta"):
        skeleton = create_model(dataclasses.replace(model_config, architecture=arch))
    shapes[arch] = {k: list(v.shape) for k, v in skeleton.state_dict().items()}
lines = {a: [f"{k}  {s}" for k, s in v.items() if ".layers.0." in k] for a, v in shapes.items()}
print("\n".join(difflib.unified_diff(*lines.values(), *lines.keys(), lineterm="", n=1)))
count = {a: sum(torch.Size(s).numel() for s in v.values()) for a, v in shapes.items()}
extra = count["Qwen3ForCausalLM"] - count["LlamaForCausalLM"]
n_layers, d = model_config.num_layers, model_config.head_dim
assert extra == n_layers * 2 * d
print(f"整个模型多出 {n_layers} 层 × 2 × {d} = {extra} 个参数")

# %% [markdown]
# ??? note "深入：多出的 256 个参数做什么"
#
#     多出的 256 个参数作用却不小：Qwen3 的 q、k 先被拉回单位长度附近再旋转，注意力分数的尺度由 `q_norm`、`k_norm` 的权重决定，不会随着训练漂到很大，训练更稳。漏掉它，tiny Qwen3 的输出就对不上 HF；放错位置（放在 RoPE 之后），结果也不对——RMSNorm 按头内各维的均方根缩放，RoPE 把一对对维度旋转、不改变向量的模长，但 `q_norm` 的权重是逐维的，先乘权重再旋转和先旋转再乘权重不是一回事。
#
# ## 参数名：沿用 HF 的名字，只合并两处
#
# 除了 `q/k/v_proj` 合成 `qkv_proj`、`gate/up_proj` 合成 `gate_up_proj`，我们的参数名就是 HF 的参数名。拿 tiny Qwen3 的文件和模型对第 0 层：

# %%
from IPython.display import Markdown
from safetensors import safe_open

with safe_open(str(path / "model.safetensors"), framework="pt") as f:
    file_keys = [k for k in f.keys() if ".layers.0." in k]
ours = [k for k in model.state_dict() if ".layers.0." in k]
merged = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj",
          "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj"}
rows = ["| 文件里（HF） | 模型里（我们） |", "|---|---|"]
for k in file_keys:
    module = k.split(".")[-2]
    target = k.replace(f".{module}.", f".{merged.get(module, module)}.")
    assert target in ours
    short = lambda name: name.removeprefix("model.layers.0.")  # noqa: E731
    rows.append(f"| `{short(k)}` | `{short(target)}` |")
assert len(file_keys) == 11 and len(ours) == 8
Markdown("\n".join(rows))

# %% [markdown]
# 文件里一层 11 个张量，模型里 8 个。名字对上只靠一件事：属性名和 HF 的模块名写得一样。
#
# ### 共享嵌入：LM head 借用嵌入层
#
# SmolLM2、Qwen3-0.6B 都是 `tie_word_embeddings = True`（[共享嵌入](../glossary.md#tied-embeddings)）：`ParallelLMHead` 收到 `tied_embedding` 就删掉自己的 `weight`，`state_dict` 里没有 `lm_head`。它存的是嵌入**层**：

# %% tags=["remove-input"]
listing("minisgl/layers/embedding.py", "ParallelLMHead.__init__")

# %% [markdown]
# 区别在加载的那一刻才显出来：

# %%
from minisgl.models import load_weight

with torch.device("meta"):
    fresh = create_model(model_config)
embed_before = fresh.model.embed_tokens.weight  # 建模型时的那个张量：meta 上，没有数据
weights = dict(load_weight(path, model_config))
fresh.load_state_dict(weights)
print("lm_head 在 state_dict 里吗？", any(k.startswith("lm_head") for k in fresh.state_dict()))
print("lm_head 借用的是嵌入层本身：", fresh.lm_head._tied is fresh.model.embed_tokens)
print("加载后的 embed_tokens.weight 就是加载器交来的那个张量：",
      fresh.model.embed_tokens.weight is weights["model.embed_tokens.weight"])
print("建模型时那个张量还在 meta 上：", embed_before.is_meta)
assert embed_before.is_meta
assert fresh.model.embed_tokens.weight is weights["model.embed_tokens.weight"]
assert fresh.model.norm.weight is weights["model.norm.weight"]  # 赋值：不拷贝，也不多占一份内存

# %% [markdown]
# 加载换掉的是嵌入层的属性，当初存下的 `embed_before` 还是 meta 上的空壳；LM head 每次前向现取，拿到的总是新的。`load_state_dict` 先核对再赋值，一个按单卡建的模型拿到 TP=2 的分片，报错且什么都不换：

# %%
from minisgl.distributed import set_tp_info

set_tp_info(0, 2)  # 以 TP=2 的 rank 0 的身份读权重：load_weight 和建层一样读 get_tp_info()
try:
    shards = dict(load_weight(path, model_config))
finally:
    set_tp_info(0, 1)
try:
    fresh.load_state_dict(shards)
    raise AssertionError("应该报错")
except ValueError as e:
    print(e)
assert fresh.model.embed_tokens.weight is weights["model.embed_tokens.weight"]  # 什么都没换

# %% [markdown]
# ??? note "深入：赋值还省了什么"
#
#     赋值还有一个好处：不需要先给模型分配一份内存、再把读出来的权重拷进去——那样加载的那一刻要占两倍的内存。meta 上建模型不花一个字节，交来的张量直接成为模型的权重。
#
# 形状检查抓得住“这份权重不是给这个 rank 的”，抓不住“形状对、内容错”——下面的合并顺序就是一例。
#
# ## 流式加载：一次只拿一个完整张量
#
# [`load_weight`](../glossary.md#streaming-load) 是一个生成器：按文件、按键的顺序读一个、切一个、交出一个。本 rank 是谁从 `get_tp_info()` 读，和建层时是同一处：

# %% tags=["remove-input"]
listing("minisgl/models/weight.py", "load_weight")

# %% [markdown]
# `dtype`、`device` 的转换发生在切分之后，只转本 rank 那一块；共享嵌入时多余的 `lm_head.weight`、旧导出里的 `rotary_emb` 直接跳过。
#
# ### shard_tensor：名字决定怎么切
#
# [`shard_tensor`](../glossary.md#shard-tensor) 怎么切一个张量，只看模块名（键的倒数第二段），规则和第 2 章各层的本地形状一一对应；KV 头的本地个数仍由 `local_kv_heads` 算：

# %% tags=["remove-input"]
listing("minisgl/models/weight.py", "shard_tensor")

# %% [markdown]
# | 模块名 | 怎么切 | 对应的层（第 2 章） | Qwen3-0.6B，TP=2 的 rank 0 |
# | --- | --- | --- | --- |
# | `q_proj`、`gate_proj`、`up_proj` | 第 0 维均分，取第 `rank` 段 | 列并行 `LinearQKVMerged` / `LinearColParallelMerged` | `q_proj` `[2048, 1024]` → `[1024, 1024]` |
# | `k_proj`、`v_proj` | 第 0 维按 **KV 头**分；头比 rank 少时相邻几个 rank 共用（复制）一个头 | `LinearQKVMerged` 的 KV 部分 | `[1024, 1024]` → `[512, 1024]` |
# | `o_proj`、`down_proj`（二维的 weight） | 第 1 维均分 | 行并行 `LinearOProj` / `LinearRowParallel` | `down_proj` `[1024, 3072]` → `[1024, 1536]` |
# | `embed_tokens`、`lm_head` | 每段 `div_ceil(vocab, size)` 行，最后一段不够就补零行 | `VocabParallelEmbedding` / `ParallelLMHead` | `[151936, 1024]` → `[75968, 1024]` |
# | 其余（各种 norm、`o_proj` / `down_proj` 的 bias……） | 不切，每个 rank 一份完整的 | `RMSNorm`；行并行的 bias 在 all-reduce 之后才加 | `[1024]` → `[1024]` |

# %%
from minisgl.models import shard_tensor


def labeled(n_heads, rows_per_head=2):  # 第 h 个头的每一行都写成 h
    return torch.arange(n_heads).repeat_interleave(rows_per_head).float().unsqueeze(1)


def heads(t, rows_per_head=2):
    return t[::rows_per_head, 0].int().tolist()


def cut(module, value, size):  # 每个 rank 拿到的头号
    key = f"model.layers.0.self_attn.{module}.weight"
    return [heads(shard_tensor(key, value, r, size, num_kv_heads=8)) for r in range(size)]


q, kv = labeled(16), labeled(8)
for size in (2, 16):
    got_q, got_k = cut("q_proj", q, size), cut("k_proj", kv, size)
    # 本 rank 的 q 头 h 要用的 KV 头是 h // 2：切 KV 的规则必须恰好给出这些头
    assert all(sorted({h // 2 for h in qs}) == ks for qs, ks in zip(got_q, got_k))
    if size == 2:
        for r in range(2):
            print(f"TP=2 ：rank {r} 的 q 头 {got_q[r]}，KV 头 {got_k[r]}")
    else:
        print("TP=16：rank 0～15 的 q 头", " ".join(str(h) for (h,) in got_q))
        print("       rank 0～15 的 KV 头", " ".join(str(h) for (h,) in got_k))

vocab = torch.arange(10).float().unsqueeze(1) + 1  # 词表 10 行，从 1 编号：补出来的 0 一眼可见
key = "model.embed_tokens.weight"
pieces = [shard_tensor(key, vocab, r, 4, num_kv_heads=8)[:, 0].int().tolist() for r in range(4)]
print(f"词表 10 行、TP=4，每个 rank div_ceil(10, 4) = 3 行：{pieces}")
assert pieces[-1] == [10, 0, 0]

# %% [markdown]
# ??? note "深入：KV 头复制、补零行，以及两道关卡"
#
#     TP=16 时 8 个 KV 头不够分，相邻两个 rank 共用一个：rank `r` 拿 KV 头 `r // 2`，正是它那个 q 头 `r` 要用的头（q 头 `h` 用 KV 头 `h // (16 / 8)`）。词表不能被整除时，每个 rank 仍然存一样多的行，最后一个 rank 补零：`ParallelLMHead` 最后要把各 rank 的 logits all-gather 成一整行，各段一样宽才拼得起来，拼完再切掉补的那几列（第 2 章）。
#
#     `shard_tensor` 一次只看得到一个张量，它能检查的有限：SmolLM2 有 9 个 q 头，`q_proj` 576 行，TP=2 时 576 能被 2 整除，这里照切不误，却把第 4 个头劈成了两半。拦住它的是建模型时 `LinearQKVMerged` 里的 `div_even(9, 2)`——模型先建好、形状先定下来，加载器交来的每一块都要和它对上，这是两道互相补位的关卡。
#
# ### 先切，再拼
#
# ![TP=2、16 个 q 头、8 个 KV 头：先把 q、k、v 各自按头切、再在每个 rank 上拼，每个 rank 拿到 8 个 q 头和它们要用的 4 个 KV 头；先拼成 qkv 再切两半，rank 0 拿到全部 q 头、rank 1 拿到全部 k 和 v，按 [8 q | 4 k | 4 v] 拆开时头全错位，而形状完全相同](../assets/ch03_shard_merge.svg)
#
# 先拼再切，rank 0 拿到 16 个 q 头，却把其中 8 个当成 k 和 v；形状一模一样，`load_state_dict` 全部通过。用两个模拟的 rank 实测，一组按加载器的做法，一组把 qkv 换成先拼再切：

# %%
from examples.ch02_layers import ThreadComm
from minisgl.distributed import DistributedCommunicator, set_tp_info
from safetensors.torch import load_file

prompts = [encode(path, p) for p in ["The capital of France is", "1, 2, 3, 4,"]]
refs = [hf_logits(path, p)[-1] for p in prompts]
full = load_file(str(path / "model.safetensors"))
TP = 2


def build_rank(rank, merge_then_split):
    set_tp_info(rank, TP)  # 建模型之前登记“我是谁”：各层只分配本 rank 的形状
    try:
        with torch.device("meta"):
            m = create_model(model_config)
        w = dict(load_weight(path, model_config))  # 同样按登记的 rank 切
    finally:
        set_tp_info(0, 1)
    if merge_then_split:
        for i in range(model_config.num_layers):
            p = f"model.layers.{i}.self_attn."
            qkv = torch.cat([full[p + f"{x}_proj.weight"] for x in "qkv"])  # 先拼
            wrong = qkv.chunk(TP)[rank].clone()  # 再切
            assert wrong.shape == w[p + "qkv_proj.weight"].shape  # 形状一模一样
            w[p + "qkv_proj.weight"] = wrong
    m.load_state_dict(w)  # 不报错
    return m


def batch_of(prompts):
    reqs = [make_req(i, p) for i, p in enumerate(prompts)]
    batch = Batch(reqs=reqs, phase="prefill")
    batch.padded_reqs = reqs
    batch.input_ids = torch.cat([r.input_ids for r in reqs])
    batch.positions = torch.cat([torch.arange(len(p), dtype=torch.int32) for p in prompts])
    return batch


for label, merge_then_split in (("先切、再拼", False), ("先拼、再切", True)):
    ranks = [build_rank(r, merge_then_split) for r in range(TP)]
    comm = ThreadComm(TP)
    DistributedCommunicator.plugins.append(comm)  # 层用插件列表里的最后一个
    try:
        with ctx.forward_batch(batch_of(prompts)):
            outs = comm.run(lambda r: ranks[r].forward())
    finally:
        DistributedCommunicator.plugins.remove(comm)
    err = max((outs[0][i] - refs[i]).abs().max().item() for i in range(len(prompts)))
    same = [outs[0][i].argmax().item() == refs[i].argmax().item() for i in range(len(prompts))]
    shown = "< 1e-4" if err < 1e-4 else f"{err:.0f}"
    print(f"{label}：两个 rank 的 logits 与 HF 的最大差 {shown}，argmax 与 HF 相同：{same}")
    assert (err < 1e-4) if not merge_then_split else (err > 1 and not any(same))

# %% [markdown]
# 先拼再切：加载不报错，前向不报错，logits 与 HF 差出几十，下一个 token 全错。这种错只有和参照实现对答案才抓得住。
#
# ### 缓冲区：凑齐一组才交出去
#
# safetensors 里的键按名字排序，同一层的 q、k、v 不挨着。加载器用一个小缓冲 `pending` 攒切好的分片，一组凑齐就拼好交出。包一层 `safe_open`，记下每读一个张量后交出了什么、缓冲里还压着几块：

# %%
import minisgl.models.weight as weight_module

real_safe_open = weight_module.safe_open
trace = []  # [读到的键, 交出的名字, 处理完之后缓冲里的块数]


class RecordingReader:
    """包住 safe_open：每读一个张量记一笔；读下一个之前，记下上一个处理完时缓冲里有几块。"""

    def __init__(self, *args, **kwargs):
        self._file = real_safe_open(*args, **kwargs)

    def __enter__(self):
        self._inner = self._file.__enter__()
        return self

    def __exit__(self, *exc):
        return self._file.__exit__(*exc)

    def keys(self):
        return self._inner.keys()

    def get_tensor(self, key):
        if trace:
            trace[-1][2] = buffered()
        trace.append([key, [], 0])
        return self._inner.get_tensor(key)


def buffered():
    return sum(len(parts) for parts in stream.gi_frame.f_locals["pending"].values())


weight_module.safe_open = RecordingReader
try:
    stream = load_weight(path, model_config)
    for name, _ in stream:
        trace[-1][1].append(name)
        trace[-1][2] = buffered()
finally:
    weight_module.safe_open = real_safe_open

short = lambda k: k.removeprefix("model.layers.0.")  # noqa: E731
print(f"{'读到':<32}{'交出':<32}缓冲里")  # 每个汉字占两格，所以少补两格
for key, out, n in trace[1:12]:  # 第 0 层的 11 个键
    print(f"{short(key):<34}{(short(out[0]) if out else '—'):<34}{n} 块")
n_out, most = sum(len(o) for _, o, _ in trace), max(n for *_, n in trace)
print(f"整个文件：读 {len(trace)} 个张量，交出 {n_out} 个，缓冲里最多 {most} 块")
assert most == 2 and trace[-1][2] == 0

# %% [markdown]
# 缓冲里最多 2 块，而且是切过的分片。文件读完缓冲还不空，说明检查点缺了张量，这时报错并说出是哪几组：

# %%
import shutil
import tempfile
from pathlib import Path

from safetensors.torch import save_file

with tempfile.TemporaryDirectory() as tmp:
    broken = Path(tmp)
    shutil.copy(path / "config.json", broken / "config.json")
    layer0 = {k: full[k] for k in full if ".layers.0." in k and "v_proj" not in k}
    save_file(layer0, str(broken / "model.safetensors"))
    got = []
    try:
        for name, _ in load_weight(broken, model_config):
            got.append(name)
        raise AssertionError("应该报错")
    except ValueError as e:
        print(f"先交出了 {len(got)} 个张量，读完文件才发现：\n  {e}")
assert "model.layers.0.mlp.gate_up_proj.weight" in got
assert "model.layers.0.self_attn.qkv_proj.weight" not in got

# %% [markdown]
# ??? note "深入：跨文件的组和报错时机"
#
#     按这个顺序，缓冲里最多压着 2 块（`k_proj` 和 `q_proj` 的分片，等 `v_proj`），而且是**切过以后**的分片。换一种存法——比如一个检查点分成几个文件，某层的 q 在第一个文件末尾、k 和 v 在第二个文件开头——需要缓冲的块数会变，规则不变：凑不齐的才缓冲，凑齐的马上交出；`pending` 定义在文件循环之外，跨文件也能凑。
#
#     不在中途报错，是因为中途无从知道：缺的那一块也许在后面的文件里。报错的时机在读完最后一个文件之后、生成器结束之前，消费者（`dict(load_weight(...))`）还没来得及把半套权重装进模型。
#
# ### 峰值内存：一次一个完整张量
#
# 流式加载时，一个 rank 在任一时刻只比自己的分片多一个正在处理的完整张量。拿 Qwen3-0.6B 和 Llama-3.1-70B 的尺寸比一比“先全读再切”：

# %%
from examples.ch03_models import rank_shapes


def hf_tensor_sizes(c):
    """检查点里每个张量的元素个数（HF 的原始名字，合并之前）。"""
    d, h, inter = c.head_dim, c.hidden_size, c.intermediate_size
    q, kv = c.num_qo_heads * d, c.num_kv_heads * d
    layer = {"q_proj": q * h, "k_proj": kv * h, "v_proj": kv * h, "o_proj": h * q,
             "gate_proj": inter * h, "up_proj": inter * h, "down_proj": h * inter,
             "input_layernorm": h, "post_attention_layernorm": h}
    if c.architecture == "Qwen3ForCausalLM":
        layer.update(q_norm=d, k_norm=d)
    sizes = {"embed_tokens": c.vocab_size * h, "norm": h}
    sizes.update({f"layers.{i}.{k}": v for i in range(c.num_layers) for k, v in layer.items()})
    if not c.tie_word_embeddings:
        sizes["lm_head"] = c.vocab_size * h
    return sizes


llama70b = ModelConfig.from_hf({
    "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 80, "hidden_size": 8192,
    "intermediate_size": 28672, "num_attention_heads": 64, "num_key_value_heads": 8,
    "vocab_size": 128256, "rms_norm_eps": 1e-5,
    "max_position_embeddings": 8192,  # 真实值 131072，还带 llama3 的 rope_scaling；算形状用不着
    "tie_word_embeddings": False})
TP8 = 8
head = ["模型（bf16）", "整个模型", "最大的一个张量", "TP=8 时一个 rank 的分片",
        "先全读再切：一个 rank 最多拿着", "流式：一个 rank 最多拿着"]
rows = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
for label, cfg, (unit, scale, digits) in (("Qwen3-0.6B", q06, ("MiB", 2**20, 0)),
                                          ("Llama-3.1-70B", llama70b, ("GiB", 2**30, 1))):
    sizes = hf_tensor_sizes(cfg)
    whole, biggest = sum(sizes.values()) * 2, max(sizes.values()) * 2
    assert max(sizes, key=sizes.get) == "embed_tokens"  # 两个模型最大的都是嵌入矩阵
    shard = sum(torch.Size(s).numel() for s in rank_shapes(cfg, TP8).values()) * 2
    size = lambda b: f"{b / scale:.{digits}f} {unit}"  # noqa: E731
    cells = [label, size(whole), size(biggest), size(shard),
             size(whole + shard), size(biggest + shard)]
    rows.append("| " + " | ".join(cells) + " |")
    if label == "Qwen3-0.6B":
        assert round(whole / 2**20) == 1137 and round(biggest / 2**20) == 297
Markdown("\n".join(rows))

# %% [markdown]
# 70B 的模型先全读要 131 GiB，一张 80 GB 的卡放不下；流式加载只多一个 2 GiB 的嵌入矩阵，与 TP 数无关。
#
# ??? note "深入：内存映射、上界，以及为什么分片要拷贝"
#
#     这张表说的是**上界**。safetensors 在 CPU 上读出的张量其实是文件的内存映射：`get_tensor` 本身不拷贝，切分时碰到哪些页才读进哪些页。按行切（q、k、v、gate、up、词表）只读本 rank 那几行所在的页；按列切（o_proj、down_proj）每一行都要取一段，整个张量的页都会被读到。这些页是操作系统的页缓存，同一台机器上读同一个文件的几个 rank 共用，内存紧张时可以回收；真正属于进程自己的，只有拷出来的分片。反过来，要是读法会把整个张量拷出来（比如直接读到 GPU 上，或者旧版本的库），上表的“一个完整张量”就是实打实的。这也是 `shard_tensor` 一定要把切片拷成独立内存的原因：只交出一个视图，完整张量（或者整段映射）就被它一直拽着，放不掉。
#
# ## Qwen3-0.6B：TP=16 时复制的 KV 头多占一成
#
# 把规则用到整个 Qwen3-0.6B：在 meta 上按 TP=1、2、16 各建一次（rank 0 的视角），表格由 main 的 `qwen3_shape_table` 现算：

# %%
from examples.ch03_models import qwen3_shape_table

Markdown(qwen3_shape_table())

# %% [markdown]
# ??? note "深入：逐行读这张表"
#
#     - `qkv_proj` 是 `(16 + 8 + 8) × 128 = 4096` 行；TP=2 时每个 rank `(8 + 4 + 4) × 128 = 2048` 行；TP=16 时 `(1 + 1 + 1) × 128 = 384` 行——8 个 KV 头不够 16 个 rank 分，每个 rank 放一个（复制）。
#     - `gate_up_proj` 是 gate 和 up 各 3072 行拼起来，每个 rank 各取自己那一段再拼：TP=16 时 `192 + 192 = 384` 行。`o_proj`、`down_proj` 切的是第二维。
#     - 词表 151936 正好能被 16 整除，每个 rank 9496 行，不用补零；所有归一化权重每个 rank 一份完整的。`lm_head` 不在表里：它借用 `embed_tokens`。
#
#     最后两行是参数量。TP=2 时每个 rank 298.1 M，乘 2 比完整模型只多了一份归一化权重（每个 rank 各存一份）。TP=16 时每个 rank 41.0 M，乘 16 却比完整模型多出 59.7 M，下面把它拆开。
#
# TP=16 时每个 rank 的参数乘 16，比完整模型多出的部分可以精确拆开：

# %%
from examples.ch03_models import TP_SIZES

def n_params(tp):
    return sum(torch.Size(s).numel() for s in rank_shapes(q06, tp).values())


counts = {tp: n_params(tp) for tp in TP_SIZES}
L, h, d = q06.num_layers, q06.hidden_size, q06.head_dim
more_heads = 16 - q06.num_kv_heads
kv_copies = L * 2 * more_heads * d * h  # 每层 k、v 各从 8 个头变成 16 份
# 每个 rank 都存一份的：每层两个 hidden 宽、两个 head_dim 宽的归一化，再加最后的 norm
norms = L * (2 * h + 2 * d) + h
extra = 16 * counts[16] - counts[1]
M = 1e6
print(f"16 个 rank 合计 {16 * counts[16] / M:.1f} M，完整模型 {counts[1] / M:.1f} M，"
      f"多出 {extra / M:.1f} M：")
print(f"  复制的 KV 头：{L} 层 × (k、v) 2 × 多出的 {more_heads} 个头 × {d} × {h}"
      f" = {kv_copies / M:.1f} M")
print(f"  多存 15 份的归一化权重：15 × {norms} = {15 * norms / M:.1f} M")
assert extra == kv_copies + 15 * norms

# %% [markdown]
# ??? note "深入：KV 头复制的代价"
#
#     复制 KV 头的代价几乎全在这里：为了让注意力不通信，每个 KV 头在两个 rank 上各存一份 `k_proj`、`v_proj` 的行。按理想的均分每个 rank 是 596.0 / 16 ≈ 37.3 M，实际 41.0 M，多了一成。这也是 TP 不宜超过 KV 头数太多的原因之一。
#
# ## 和 Hugging Face 对答案：float32、最后一个 token
#
# LM head 在 prefill 时只为每个请求的最后一个位置算 logits，所以只比最后一个 token：

# %% tags=["remove-input"]
listing("minisgl/layers/embedding.py", "ParallelLMHead.forward")

# %% [markdown]
# ??? note "深入：中间位置由什么保证"
#
#     3 个提示拼成 25 个 token 的一批，输出是 `[3, 49152]`，不是 `[25, 49152]`：采样只用最后一个位置，其余位置的 logits 算出来也是白算（对 Qwen3-0.6B，一个 2048 token 的提示全算要 1.2 GB 的 float32 logits）。`hf_logits` 给的是每个位置的 logits，我们取它的最后一行 `[-1]` 来比。中间位置算得对不对，由上面逐层隐状态的比较、以及“贪心生成逐 token 相同”来保证。
#
# 为什么在 float32 下比？我们和 HF 做同样的数学、不同的运算顺序。在 tiny Qwen3 上两种精度各跑一遍：

# %%
# NBVAL_IGNORE_OUTPUT
from minisgl.utils import torch_dtype

texts = ["The capital of France is", "1, 2, 3, 4,", "Once upon a time, there was a little"]
prompts3 = [encode(path, p) for p in texts]
ref32 = [hf_logits(path, p)[-1] for p in prompts3]
with quiet_transformers():
    hf16 = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).eval()
with torch.inference_mode():
    ref16 = [hf16(torch.tensor([p])).logits[0, -1].float() for p in prompts3]

ours = {}
for dtype in (torch.float32, torch.bfloat16):
    # 权重按目标精度建：load_state_dict 会核对 dtype
    with torch.device("meta"), torch_dtype(dtype):
        m_ = create_model(model_config)
    m_.load_state_dict(dict(load_weight(path, model_config, dtype=dtype)))
    ours[dtype] = prefill(m_, ctx, prompts3).float()

for i, text in enumerate(texts):
    e32 = (ours[torch.float32][i] - ref32[i]).abs().max().item()
    e16 = (ours[torch.bfloat16][i] - ref32[i]).abs().max().item()
    e16hf = (ours[torch.bfloat16][i] - ref16[i]).abs().max().item()
    flip = ours[torch.bfloat16][i].argmax() != ref16[i].argmax()
    print(f"{text!r}\n    float32 与 HF float32 差 {e32:.1e}；bf16 与 HF float32 差 {e16:.2f}，"
          f"与 HF bf16 差 {e16hf:.2f}" + ("；argmax 与 HF bf16 不同！" if flip else ""))
    assert e32 < 1e-4 and e16 > 1e-2 and e16hf > 1e-2

# %% [markdown]
# float32 下差 1e-5 量级，bf16 下两边各自舍入，差零点几，分不出是 bug 还是舍入。容差 1e-4 远小于真 bug 的误差。开头那个读错的 `rope_theta` 就是真 bug：把 tiny Qwen3 的 1e6 换成 1e4 再比一次：

# %%
import dataclasses

from minisgl.models import create_model, load_weight

wrong_config = dataclasses.replace(model_config, rope_theta=1e4)  # 只读顶层、缺省 10000 会读成这样
with torch.device("meta"):
    wrong = create_model(wrong_config)
wrong.load_state_dict(dict(load_weight(path, wrong_config)))
for text, ids, ref in zip(texts, prompts3, ref32):
    ours = prefill(model, ctx, [ids])[0]
    bad = prefill(wrong, ctx, [ids])[0]
    ok = (ours - ref).abs().max().item()
    print(f"{len(ids):>2} 个 token：rope_theta=1e6 差 {'< 1e-4' if ok < 1e-4 else ok}，"
          f"读成 1e4 差 {(bad - ref).abs().max().item():.1f}")
    assert (ours - ref).abs().max() < 1e-4 < (bad - ref).abs().max()

# %% [markdown]
# ??? note "深入：bf16 与 float32 的舍入"
#
#     这个单元的数字随 CPU 而变（bf16 的矩阵乘内核因指令集而异），所以不参与输出比对，但断言照样执行：float32 下与 HF 相差 1e-5 量级；bf16 下与 HF 的 float32 差零点几，与 HF 自己的 bf16 也差零点几——两边都没错，只是舍入不同。在我们写书的机器上，第一个提示在 bf16 下连 argmax 都和 HF 不同（tiny Qwen3 的权重是随机的，logits 比较平，前两名常常挨得很近）。拿 bf16 对答案，就分不清一个 0.3 的误差是 bug 还是舍入；float32 下容差 1e-4 比舍入误差大约一个数量级，又比任何真 bug（头放错、少加一次残差、RoPE 位置不对）造成的误差小好几个数量级——真 bug 动辄差出 1 到几十，前面“先拼再切”差了三十多。生产环境当然用 bf16 跑；正确性在 float32 下验证，bf16 只是换了精度、没换代码。
#
# ## 运行
#
# 把本章的 main 跑一遍：

# %%
run("python examples/ch03_models.py")

# %% [markdown]
# 值得注意：
#
# - 第一节三份配置读成同样的字段，`rope_theta` 都是 float；SmolLM2 的 `head_dim = 64` 恰好等于 `576 / 9`，两个 Qwen3 都不等。
# - 第二节整张形状表在 meta 上建出，每个 rank 的 bf16 占用从 1137 MiB 降到 568 MiB、78 MiB。
# - 第三节 SmolLM2 的 `load_weight` 交出 182 个张量，其中 60 个是合并出来的，正好是模型 `state_dict` 的全部键。
# - 第四节没有 KV 缓存，每一步把整个前缀重算一遍，与 HF 的贪心结果逐 token 相同。

# %% [markdown]
# ## 与上游的差异
#
# - 我们直接解析 `config.json`、两种 RoPE 写法都认、缩放和非 SiLU 一律拒绝，[上游](../glossary.md#upstream)用 `AutoConfig` 读出对象、把 `rope_scaling` 传给 RoPE 层（`models/config.py` · `ModelConfig.from_hf`），因为引擎不依赖 transformers，也没实现缩放。
# - 我们让 Qwen3 继承 Llama、只改三个类属性，上游 `llama.py`、`qwen3.py` 各写一整份（`models/qwen3.py` · `Qwen3ForCausalLM`），因为差别只有 q/k 归一化。
# - 我们的词表分片补零行、各 rank 一样高，上游按 `[start, min(end, vocab))` 截取不补零（`models/weight.py` · `_shard_tensor`），因为词表除不尽时形状要和层对得上。
# - 我们在文件读完时对凑不齐的组抛 `ValueError`，上游用 `assert not merge_buf`（`models/weight.py` · `load_weight`），因为 `python -O` 下 assert 会消失，而这是检查点的问题，不是内部不变量。
#
# ??? note "深入：与上游的更多差别和加载器的演变"
#
#     - **配置从哪里来。** 上游的 `ModelConfig.from_hf` 吃的是 transformers 的 `PretrainedConfig`（`utils/hf.py` 的 `cached_load_hf_config` 用 `AutoConfig` 读），RoPE 的参数放在嵌套的 `RotaryConfig(head_dim, rotary_dim, max_position, base, scaling)` 里，`rope_scaling` 原样传下去由 RoPE 层处理；还读 `hidden_act`、`model_type`，以及 MoE 的 `num_experts`、`num_experts_per_tok`、`moe_intermediate_size`、`norm_topk_prob`，多模态包装的配置会先取 `text_config`。缺省值的处理（`head_dim`、`num_key_value_heads` 用 `getattr` 带缺省）与我们相同。我们直接解析 JSON，引擎本身不依赖 transformers；不支持的 `rope_scaling` 直接报错。
#     - **注册表。** 上游 `register.py` 的 `_MODEL_REGISTRY` 把架构名映射到（模块路径, 类名），`get_model_class` 用 `importlib` 按需导入，只有用到的模型文件才会被 import；`models/__init__.py` 的 `create_model(model_config)` 取 `architectures[0]`。支持的架构更多：Llama、Qwen2、Qwen3、Qwen3-MoE、Mistral（含 `Mistral3ForConditionalGeneration`）、Llama 4。更早的版本是按模型路径里的子串（`"llama"`、`"qwen3"`、`"mistral"`）选类的。
#     - **模型文件。** 上游的 `llama.py`、`qwen3.py` 是两份各自完整的文件，各写一遍 `DecoderLayer`、`Model`、`ForCausalLM`，区别在给 `RopeAttn` 传 `has_qk_norm=True`；我们让 Qwen3 继承 Llama、只改三个类属性。上游 `RopeAttn` 的 bias 开关只管 qkv（`has_attn_bias`），`o_proj` 固定没有 bias，`GatedMLP` 按 `hidden_act` 在 `silu_and_mul` 和 `gelu_and_mul` 之间选；我们按 HF 的 `attention_bias` 同时管 q/k/v/o，激活固定是 SiLU。上游各层的 `forward` 还套着 `nvtx_annotate`，方便在 Nsight 里看时间线。
#     - **装权重。** 上游 `layers/base.py` 的 `BaseOP.load_state_dict` 边走边从字典里 `pop` 键、用 `assert` 核对形状和 dtype，最后字典里有剩余的键就抛 `RuntimeError`；中途某个形状不对时，前面的层已经换上了新权重。我们先把名字、形状、dtype 全部核对完再一次性赋值，报错用 `ValueError` 并列出是哪些键。上游 `Engine.__init__` 在 `with torch.device("meta"), torch_dtype(config.dtype)` 里建模型（之前先 `set_rope_device`，让 RoPE 表建在 GPU 上），再由 `_load_weight_state_dict` 把 `load_weight` 交来的张量 `.to(self.dtype)` 收进字典、交给 `load_state_dict`；它还支持 `use_dummy_weight`（随机权重，压测用）。我们的 `load_weight` 自己做 dtype 和设备的转换。
#     - **切分的规则。** 上游 `weight.py` 的 `_shard_tensor` 按子串判断（`_SPLIT_DIM_0`、`_SPLIT_DIM_1` 两个列表里的 `".q_proj"`、`".o_proj"`……，词表看 `"lm_head"`、`"embed_tokens"`），我们按整段模块名。词表那段上游按 `[start, min(end, vocab))` 截取、不补零，而 `VocabParallelEmbedding` 按 `div_ceil(vocab, tp)` 分配：词表不能被 TP 数整除时，最后一个 rank 的形状会对不上；我们补零行，各 rank 一样高。KV 头少于 rank 数时的复制是上游 PR #101 加进来的（起因是 Qwen3-30B-A3B 只有 4 个 KV 头，TP=8 时 `div_even` 断言失败），规则与我们相同：rank `r` 取第 `r * num_kv_heads // size` 个头。
#     - **合并与报错。** 上游用 `_MERGE_GROUPS` / `_SLOT_NAMES` 描述哪几个投影合成一组，`_get_merge_info` 算出合并后的名字，`merge_buf` 就是我们的 `pending`；文件读完时用 `assert not merge_buf` 检查（`python -O` 下会消失），我们抛 `ValueError`。较新的版本还处理 MoE 的专家权重（按专家号凑齐后 `torch.stack`，专家并行时跳过不归本 rank 的专家），本书计划在第 20 章（MoE）再讲。
#     - **加载器的演变。** 上游最早的 `load_weight` 先把所有张量读进一个字典，再 `_shard_state_dict`、再 `_merge_state_dict`（也是先切后拼，但不是流式）。PR #83 改成在 `safe_open` 里直接读到 GPU，加载从 90 秒降到 14 秒；PR #93 发现 TP 下每个 rank 都先把没切的整个模型读上 GPU、显存不够，于是改成一个张量一个张量地读、切、交出——正是本章的流式写法；PR #101 加了 KV 头复制，并把读取改回直接读到设备上。被关闭的 PR #108 指出 `_shard_tensor` 里的 `.clone()` 在内存映射上引发大量缺页、TP 越大加载反而越慢，提议改成零拷贝的视图、按文件成批搬上 GPU。我们的 `load_weight` 在 CPU 上读、切、拷，再搬到目标设备：不追求加载速度，只保证每个 rank 手里最多一个完整张量。
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 从 HF 配置读出模型配置：`python/minisgl/models/config.py` · `ModelConfig.from_hf`（第 40～87 行）
# - 架构名到模型类：`python/minisgl/models/register.py` · `_MODEL_REGISTRY`（第 5～12 行）、`python/minisgl/models/register.py` · `get_model_class`（第 15～21 行）
# - 注意力和 MLP 两块积木：`python/minisgl/models/utils.py` · `RopeAttn`（第 79～123 行）、`python/minisgl/models/utils.py` · `GatedMLP`（第 25～50 行）
# - Llama：`python/minisgl/models/llama.py` · `LlamaDecoderLayer`（第 18～43 行）、`python/minisgl/models/llama.py` · `LlamaForCausalLM`（第 68～82 行）
# - Qwen3，另写一整份，差在 `has_qk_norm=True`：`python/minisgl/models/qwen3.py` · `Qwen3DecoderLayer`（第 18～41 行）、`python/minisgl/models/qwen3.py` · `Qwen3ForCausalLM`（第 66～80 行）
# - 流式读、切、合并：`python/minisgl/models/weight.py` · `load_weight`（第 75～124 行）、`python/minisgl/models/weight.py` · `_shard_tensor`（第 34～52 行）、`python/minisgl/models/weight.py` · `_get_merge_info`（第 55～60 行）
# - 把权重装进模型：`python/minisgl/layers/base.py` · `BaseOP.load_state_dict`（第 32～53 行）、`python/minisgl/engine/engine.py` · `Engine._load_weight_state_dict`（第 139～146 行）

# %% [markdown]
# ## 测试
#
# `tests/test_ch03_models.py` 用 tiny Qwen3、SmolLM2 和测试里现造的小模型。第一个检查 `ModelConfig` 读的是装着的 transformers 真写出来的配置：建 `LlamaConfig`、`Qwen3Config`，`save_pretrained`，再读回来：

# %% tags=["remove-input"]
listing("tests/test_ch03_models.py", "test_config_reads_rope_theta_where_transformers_writes_it")

# %% [markdown]
# 第二个检查先切后拼：每个 rank 的 `qkv_proj`、`gate_up_proj` 等于直接从完整权重里按头取出的那几段：

# %% tags=["remove-input"]
listing("tests/test_ch03_models.py", "test_merging_after_sharding_equals_slicing_the_merged_weight")

# %% [markdown]
# 第三个把整条路径串起来：每个 rank 一个线程，TP=2 和 TP=16 下整个模型的前向与 HF 的 logits 一致：

# %% tags=["remove-input"]
listing("tests/test_ch03_models.py", "test_simulated_tensor_parallel_matches_hf")

# %%
run("python -m pytest -q --color=no tests/test_ch03_models.py")

# %% [markdown]
# ## 怎么讲清楚
#
# 加载一个 HF 模型分三步：读配置、在 meta 上建模型、流式装权重。配置在入口处读对：`head_dim` 先读配置，`rope_theta` 在顶层和 `rope_parameters` 里都找，引擎没实现的缩放和激活直接报错。加载器一次读一个张量，按模块名切出本 rank 的一块，q/k/v 先切后拼，凑齐才交出。这样每个 rank 任一时刻只多拿一个完整张量，最大是嵌入矩阵，与 TP 数无关。正确性在 float32 下和 HF 比，容差 1e-4；把 `rope_theta` 读成 1e4，误差就大出好几个数量级。

# %% [markdown]
# ## 练习
#
# 1. **加上 Qwen2。** Qwen2 的 q、k、v 带 bias，`o_proj` 不带，`config.json` 里没有 `attention_bias`。`ModelConfig`、`utils.py`、模型文件、注册表各要改什么？加载器要改吗？
# 2. **跨文件的一组。** 第 5 层的 `q_proj` 在第一个文件末尾，`k_proj`、`v_proj` 在第二个文件开头。`load_weight` 还能正确合并吗？缓冲里最多几块？
# 3. **支持 llama3 缩放。** 要让 `ModelConfig` 接受 `rope_type = "llama3"`，除了配置，还要改哪里？怎样测试它算对了？
# 4. **挑战：只读自己那块。** safetensors 的 `get_slice(key)` 可以只取张量的一部分。把 `shard_tensor` 的规则改写成切片读取；在返回内存映射张量的 CPU 上，这样能省下内存吗？
#
# ??? success "参考答案"
#
#     1. 给配置加一个“qkv 带 bias”的开关（或由模型类固定），`RopeAttn` 把 qkv 与 o 的 bias 分开，照 `qwen3.py` 写三个子类、注册表加一行。加载器不用改：`q_proj.bias` 等按同样的规则切，合并成 `…qkv_proj.bias`。
#     2. 能：`pending` 在文件循环之外，跨文件也能凑。缓冲里最多 2 块（q、k，等 v）。
#     3. RoPE 层要按 llama3 的规则改写 `inv_freq`，`ModelConfig` 要把缩放参数带给它。测试照本章的做法：用 transformers 写一个带 llama3 缩放的配置和模型，在长于 `original_max_position_embeddings` 的位置上和 HF 比 logits。
#     4. 行切用 `[r*n:(r+1)*n]`，列切用 `[:, r*n:(r+1)*n]`，KV 头按头号算行范围，词表读完再补零。CPU 上 `get_tensor` 本来就是内存映射、只碰用到的页，几乎省不下；直接读到 GPU 时才省下完整张量那一份。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 9    # 把第 9 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 9     # 判题
# python practice/judge.py hint 9     # 卡住了看提示
# ```
#
# 009 就是本章的 `shard_tensor`：五条规则、KV 头复制、词表补零和该报错的情形，在随机的 TP 数、头数、dtype 上逐 rank 比较；010 是加载器的合并缓冲，纯 Python，判题时会打乱到达顺序、检查是否凑齐就交出、交出后是否从缓冲里删掉；011 从 `config.json` 推出每个 rank 的全部权重形状和参数量，本章那张 Qwen3-0.6B 的表就是它的一个答案。

# %% [markdown]
# ## 小结
#
# - `ModelConfig` 只挑引擎要的十几个数：`head_dim` 先读配置，`rope_theta` 两种写法都认，缩放和非 SiLU 激活在入口处报错。
# - 注册表按 `architectures[0]` 选类；Qwen3 = Llama + 按头的 q/k 归一化。
# - 参数名沿用 HF，只合并 qkv 和 gate_up；共享嵌入的 LM head 引用嵌入层。
# - `load_weight` 从 `get_tp_info()` 得知本 rank，一次读一个张量，按模块名切，先切后拼，凑齐才交出。
# - 和 HF 在 float32 下比最后一个 token 的 logits，容差 1e-4。
