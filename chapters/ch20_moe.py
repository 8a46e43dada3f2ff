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
# # 第 20 章 MoE
#
# [MoE](../glossary.md#moe)（混合专家）把一层 MLP 换成几十上百个小 MLP（专家），每个 token 只交给其中 k 个：Qwen3-30B-A3B 有 305 亿个参数，一个 token 只用到 33 亿。对引擎来说多了三件事：每层按配置挑 MLP，一个[路由](../glossary.md#router)给每个 token 选专家，算专家。多进程时专家有两种分法：每个专家按 TP 切开，或者整个专家分给 rank（[专家并行](../glossary.md#expert-parallel)）。本章的运行和测试证明：书里的小 Qwen3-MoE 在两种后端、编译后的 decode、TP=2、EP=2 下都与 Hugging Face 逐 token 相同。

# %% tags=["remove-cell"]
from textwrap import indent

from IPython.display import Markdown

from minibook.page import *
setup(20)

import os
import sys

sys.path.insert(0, "examples")  # 测量的函数在 examples/ch20_bench.py 里


def in_fold(md) -> Markdown:
    """缩进 4 格：接在上一个 markdown 单元开头的 ??? 折叠框里。"""
    return Markdown(indent(md.data if isinstance(md, Markdown) else md, "    "))

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. Qwen3-30B-A3B 每层 128 个专家、每个 token 选 8 个。批大小 1 的 decode 每层要读几个专家的权重？批大小 64 呢？
# 2. 路由先对全部专家做 softmax、取前 k 个、再归一化，和先取前 k 个 logit 再对它们做 softmax，结果一样吗？
# 3. 挨个专家算（谁选了专家 e 就把谁挑出来）为什么录不进 CUDA 图？
# 4. 两个 rank 上，专家 TP 和专家并行各要几次 all-reduce？各自的代价在哪里？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 批大小 1：8 个（128 个里的 6%）。批大小 64：路由均匀时期望碰到 128 × (1 − (120/128)^64) ≈ 126 个，几乎全部——MoE 的 decode 批一大，要读的字节就接近整个模型。
#     2. 归一化时一样：前 k 个的 softmax 概率除以它们的和，分母里其余专家的那些项约掉了，正好是只对这 k 个 logit 做 softmax。不归一化（`norm_topk_prob = false`）时不一样：权重是全部专家里的概率，加起来小于 1。
#     3. 每个专家分到几行取决于这一步的数据，要把“谁选了 e”读回主机才知道循环几次、每次多大；录图时形状和地址必须固定，也不能同步。排块的写法只有上界是固定的，正好能录。
#     4. 都是每个 MoE 层一次，大小都是 [token 数, hidden]。专家 TP 的矩阵乘很瘦（每个专家的中间维切成几份）；专家并行的矩阵乘完整，但路由不均时热门专家所在的 rank 更忙，其余的 rank 等它。

# %% [markdown]
# ## 本章要回顾的文件
#
# 第 2 章的 `LinearReplicated`（`layers/linear.py`）、第 3 章的模型和加载器（`models/llama.py`、`models/weight.py`）、第 16 章的张量并行（`distributed/info.py`）、第 18 章的图捕获、第 19 章的 C++ 算子。本章新建 `moe/`（路由和两个后端）、`layers/moe.py`、`models/qwen3_moe.py` 和 `csrc/moe.cpp`；解码层的 MLP 改由可覆盖的方法 `make_mlp` 造，加载器会叠专家，Engine、上下文和启动器多了 MoE 后端和 `ep_size`。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch20_moe.py`：截下小 MoE 第一个 MoE 层的路由，打印每个 token 选的专家；把同一份路由交给 `moe_align_block_size` 排块；再用两个后端跑整个模型，和 HF 比。`python tools/steps.py check 20` 会跑它和本章的测试。书里的小 MoE 是按 Qwen3-30B-A3B 的配置缩小的随机模型（`minibook.models.tiny_qwen3_moe`，第一次用时几秒钟生成）；手上有真的 Qwen3-30B-A3B，设一个环境变量就换过去：
#
# ```bash
# python tools/steps.py run 20 -- python examples/ch20_moe.py
# MINISGL_MOE_MODEL=/path/to/Qwen3-30B-A3B python tools/steps.py run 20 -- python examples/ch20_moe.py
# python tools/steps.py run 20 -- python -m minisgl --model-path /path/to/Qwen3-30B-A3B --tp-size 2 --ep-size 2
# ```
#
# ![左：一个 rank 上的一步——路由给每个 token 选 2 个专家，moe_align_block_size 按专家排好、补齐成整块（缓冲区长度只看形状），fused_moe 一段一段地算；右：两个 rank 时，专家 TP 把每个专家切两半，专家并行把整个专家分给 rank、别的 rank 的格子标 -1，两种都以一次 all_reduce 收尾](../assets/ch20_moe.svg)
#
# ## 路由：给每个 token 选 k 个专家
#
# 路由层是一个不切的线性层（第 2 章的 `LinearReplicated`），每个 rank 都算出同样的 logits [token 数, E]。`select_experts` 的顺序和 HF 一样，所以权重逐位相同：

# %% tags=["remove-input"]
listing("minisgl/moe/topk.py", "select_experts")

# %% [markdown]
# MoE 层本身只是叠在一起的专家权重：`gate_up_proj` [E, 2 × 中间维, hidden] 和 `down_proj` [E, hidden, 中间维]。前向时选专家、交给上下文里的 MoE 后端（和注意力后端一样挂在 `ctx` 上），多 rank 时 all-reduce：

# %% tags=["remove-input"]
listing("minisgl/layers/moe.py", "MoELayer.forward")

# %% [markdown]
# 模型这一侧只改了一处：解码层不再写死门控 MLP，而是调用可覆盖的方法 `make_mlp`。`Qwen3MoeDecoderLayer` 覆盖它，按层号挑：在 `mlp_only_layers` 里、或者层号加 1 不是 `decoder_sparse_step` 倍数的层用稠密 MLP，其余用 MoE 块。书里的小 MoE 特意让第 0 层是稠密的，两条路都走到：

# %% tags=["remove-input"]
listing("minisgl/models/qwen3_moe.py", "Qwen3MoeDecoderLayer")

# %% [markdown]
# ??? note "深入：MoE 块、配置的字段和自洽检查"

# %% tags=["remove-input", "fold"]
listing("minisgl/models/qwen3_moe.py", "Qwen3MoeSparseBlock")

# %% tags=["remove-input", "fold"]
listing("minisgl/models/config.py", "ModelConfig.is_moe_layer")

# %% tags=["remove-input", "fold"]
listing("minisgl/models/config.py", "ModelConfig.check_moe")

# %% [markdown]
# ## 挨个专家算录不了图；排好块，形状只看批大小
#
# 参考实现 `LoopMoe` 和 HF 的写法一样：对每个被选中的专家，找出选了它的 token，过一遍它的 MLP，乘上权重加回去：

# %% tags=["remove-input"]
listing("minisgl/moe/loop.py", "LoopMoe.forward")

# %% [markdown]
# 它算得对，但有两处录不进图：被选中的专家有哪些要 `.tolist()` 读回主机，每个专家几行也随数据变。拿 `torch.compile(fullgraph=True)` 追踪两个后端试试（`backend="eager"`：只追踪成图，不生成代码）：

# %% tags=["milestone"]
import torch

from minisgl.kernel import load_kernels
from minisgl.moe import FusedMoe, LoopMoe, select_experts

torch.manual_seed(0)
E, k, hidden, inter, M = 8, 2, 64, 32, 5
x = torch.randn(M, hidden)
w1, w2 = torch.randn(E, 2 * inter, hidden) / 8, torch.randn(E, hidden, inter) / 6
weights, ids = select_experts(torch.randn(M, E), k, renormalize=True)
load_kernels()
for backend in (LoopMoe(), FusedMoe()):
    step = torch.compile(backend.forward, backend="eager", fullgraph=True)
    try:
        y = step(x, w1, w2, weights, ids)
        same = torch.allclose(y, backend.forward(x, w1, w2, weights, ids))
        print(f"{type(backend).__name__}：追踪成一张图，结果与不编译相同：{same}")
    except Exception as e:  # torch 的原话，只留第一行
        print(f"{type(backend).__name__}：{type(e).__name__}：{str(e).splitlines()[0]}")

# %% [markdown]
# loop 停在 `.tolist()` 上：`torch.unique` 挑出几个专家，追踪时是个未知数 `u0`（报错里那个），连循环几次都定不下来。Engine 因此拒绝给 loop 后端录图，报错让你换 fused。
#
# 上游的 GPU 实现（Triton 的 `fused_moe`）换了一种布局。一批 M 个 token、每个选 k 个专家，共 M·k 个 (token, 专家) 格子；按专家排好，每个专家补齐到块大小的整数倍，每块只属于一个专家，GPU 上每块交给一个线程块（Triton 里叫一个 program）。补齐后的长度有个只看形状的上界 M·k + E·(块大小 − 1)，我们再凑成整块（`padded_capacity`）。缓冲区就开这么大，没用到的块标 -1：

# %% tags=["remove-input"]
listing("minisgl/moe/fused.py", "moe_align_block_size")

# %% [markdown]
# 全程是张量运算，没有读回主机的数；连计数也不用 `bincount`（它的输出长度取决于数据里的最大值），而是往一个长 E + 1 的张量里 `scatter_add`。排好之后，`FusedMoe` 把布局交给 C++ 算子 `minisgl::fused_moe`：同一专家的块连成一段，每段取出这些 token 的 x、乘两次这个专家的权重（原地读，不拷贝）、乘路由权重、加回各自的行。算子里面照样按段循环，但 torch.compile 看不见：它和第 19 章的算子一样登记了只推形状的假实现，图里只是一个节点。
#
# ??? note "深入：`csrc/moe.cpp` 的全文"

# %% tags=["remove-input", "fold"]
listing("minisgl/kernel/csrc/moe.cpp")

# %% [markdown]
# 两个后端在一层 MoE 上各要多久？随机权重和输入，token 数从 1 到 512，两种形状：书里的小 MoE，和 Qwen3-30B-A3B 的一层（128 个专家选 8 个，float32 权重 2.4 GB）：

# %%
# NBVAL_SKIP
import torch

from ch20_bench import layer_times

torch.set_num_threads(2)
times = {name: layer_times(name) for name in ("小 MoE", "Qwen3-30B-A3B")}
for name, rows in times.items():
    print(f"{name}：")
    for r in rows:
        print(f"  {r['tokens']:>4} 个 token，碰到 {r['experts_hit']:>3} 个专家：loop {r['loop_ms']:8.2f} ms，"
              f"fused {r['fused_ms']:8.2f} ms（{r['loop_ms'] / r['fused_ms']:.2f} 倍），结果一致 {r['same']}")
last = times["Qwen3-30B-A3B"][-1]
flops = 2 * last["tokens"] * 8 * 3 * 2048 * 768  # 每个 (token, 专家) 格子：gate、up、down 三个矩阵乘
print(f"Qwen3-30B-A3B 的形状、{last['tokens']} 个 token：fused 每秒 {flops / last['fused_ms'] / 1e6:.0f} G 次浮点运算")
print(f"（2 个线程，机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}）")

# %%
# NBVAL_SKIP
plt = pyplot()
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
for ax, (name, rows) in zip(axes, times.items()):
    tokens = [r["tokens"] for r in rows]
    ax.plot(tokens, [r["loop_ms"] for r in rows], "o-", label="loop（挨个专家）")
    ax.plot(tokens, [r["fused_ms"] for r in rows], "s-", label="fused（排块 + C++）")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("token 数")
    ax.set_ylabel("一层 MoE，毫秒")
    ax.set_title(name)
    ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# 在 CPU 上两者差不多快：Qwen3-30B-A3B 的形状上 fused 快 3%～13%；小 MoE 上 1 个 token 时 fused 慢三成（0.71 倍：排块本身二十来个算子，比省下的还多），其余时候不相上下。时间都花在同样的矩阵乘上（512 个 token 时每秒一百多 G 次浮点运算），fused 省掉的只是 Python 里每个专家十来次算子分派。排块在 CPU 上换来的是别的：形状固定，整步 decode 能编译（第 18 章），测试 `test_compiled_decode_with_the_fused_backend_equals_hf` 查的就是这个。GPU 上它还省掉每个专家一次内核发射，那是上游写 Triton 内核的理由。
#
# ## 批一大，专家几乎全读
#
# 另一个数更要紧：decode 一步要读几个专家。批大小 1 时只读 k 个，批一大几乎全读：

# %%
# NBVAL_SKIP
from ch20_bench import experts_touched

for r in experts_touched():
    print(f"批 {r['batch']:>2}：decode 一步平均碰到 {r['measured']:.1f} / {r['experts']} 个专家"
          f"（路由均匀时的期望 {r['expected']:.1f}）")
from minibook.models import qwen3_30b_a3b_config
from minisgl.models import ModelConfig

c = ModelConfig.from_json(qwen3_30b_a3b_config())
for b in (1, 8, 64):
    hit = c.num_experts * (1 - (1 - c.num_experts_per_tok / c.num_experts) ** b)
    print(f"Qwen3-30B-A3B，批 {b:>2}：期望碰到 {hit:5.1f} / {c.num_experts} 个专家")

# %% [markdown]
# 所以 MoE 省的是算力，不一定省带宽：批大小 1 时按 3.3B 的字节读，批大小 64 时读的几乎是整个 30B。
#
# ## 加载：把一个专家一份的张量叠起来
#
# Hub 上的 Qwen3-30B-A3B（和书里的小 MoE）每个专家各存一份：`model.layers.1.mlp.experts.3.gate_proj.weight`……加载器照旧先切、再合并 gate 和 up，最后把本 rank 的专家按编号叠成 `mlp.experts.gate_up_proj`。专家并行时，别的 rank 的专家在读文件之前就跳过，一个字节都不读：

# %% tags=["remove-input"]
listing("minisgl/models/weight.py", "_read_and_merge")

# %% [markdown]
# ??? note "深入：`_stack_experts` 和 `_local_expert`"

# %% tags=["remove-input", "fold"]
listing("minisgl/models/weight.py", "_stack_experts")

# %% tags=["remove-input", "fold"]
listing("minisgl/models/weight.py", "_local_expert")

# %% [markdown]
# ## 切专家还是分专家：都是每层一次 all-reduce
#
# 默认（`ep_size=1`）每个 rank 有全部专家，每个专家的中间维切成 tp_size 份，和稠密 MLP 的切法一样：gate、up 按行，down 按列，算出部分和，all-reduce。`ep_size` 只能是 1 或 TP 的 rank 数 n；等于 n 时是[专家并行](../glossary.md#expert-parallel)：rank r 放第 r·E/n 到 (r+1)·E/n − 1 个完整的专家。路由在每个 rank 上算出同样的结果，选中别处专家的格子在本 rank 标成 -1（`MoELayer.local_ids`），两个后端都跳过它；各 rank 的贡献加起来就是全部，仍是一次 all-reduce。`EngineConfig` 检查切得开：专家 TP 要中间维整除，专家并行要专家数整除。
#
# 两种分法放在 Qwen3-30B-A3B 的 8 个 rank 上（bf16）：

# %%
from ch20_bench import split_table

t = split_table()
print(f"一个 MoE 层的专家权重 {t['layer_gb']:.2f} GB，{t['ranks']} 个 rank：")
print(f"  专家 TP：每个 rank {t['tp']['experts']} 个专家的 1/{t['ranks']}，{t['tp']['per_rank_gb']:.3f} GB，"
      f"每个专家的 gate_up 是 {t['tp']['gemm']}")
print(f"  专家并行：每个 rank {t['ep']['experts']} 个完整的专家，{t['ep']['per_rank_gb']:.3f} GB，"
      f"每个专家的 gate_up 是 {t['ep']['gemm']}")
print(f"  两者每层每个 token 的 all-reduce 都是 {t['all_reduce_bytes_per_token']} 字节")

# %% [markdown]
# 存的字节一样、通信一样，差别在算：专家 TP 的矩阵乘只有 192 列，GPU 上喂不饱；专家并行的矩阵乘完整，但每个 rank 的活取决于路由。真的起两个进程，小 MoE 生成 8 个 token（一次 prefill、7 次 decode，3 个 MoE 层），数每个 rank 的通信和它算了几个 (token, 专家) 格子：

# %% tags=["milestone"]
# NBVAL_SKIP
from ch20_bench import communication

comm = {ep_size: communication(ep_size) for ep_size in (1, 2)}
for ep_size, name in ((1, "专家 TP"), (2, "专家并行")):
    for rank, r in comm[ep_size].items():
        print(f"{name}，rank {rank}：MoE 层前向 {r['moe_calls']} 次，每次紧跟一次 all-reduce（共 {r['all_reduces_after_moe']} 次、"
              f"{r['all_reduce_bytes']} 字节）；全部 all-reduce {r['all_reduces']} 次；本 rank 算了 {r['slots']} 个格子")
assert all(r["moe_calls"] == r["all_reduces_after_moe"] for c in comm.values() for r in c.values())
assert comm[1][0]["all_reduce_bytes"] == comm[2][0]["all_reduce_bytes"]  # 两种分法通信一样多
assert comm[2][0]["slots"] + comm[2][1]["slots"] == comm[1][0]["slots"]  # EP 把格子分开，TP 每个 rank 都算全部

# %% [markdown]
# 两种分法每个 MoE 层都紧跟一次 all-reduce，字节数相同（一步 9 次 all-reduce：3 个 MoE 层、4 个注意力的 o_proj、1 个稠密层、1 次嵌入）。专家 TP 时两个 rank 都算全部 336 个格子，只是每个专家半宽；专家并行时 rank 0 算 145 个、rank 1 算 191 个，比平分（168）多 14%，一步的时间由最忙的 rank 决定。
#
# ??? note "深入：负载均衡，和专家并行的下一步"
#
#     上游在 GPU 上跑 Qwen3-30B-A3B 用的是专家 TP。大规模部署用专家并行时，要么在训练时加负载均衡的损失，要么在推理时复制热门专家。再往前一步，是注意力也按请求分到各 rank（数据并行），token 经 all-to-all 发到专家所在的 rank、算完再发回来（练习 3）；本书的 rank 都跑同一批，用不着。

# %% [markdown]
# ## 运行

# %%
run("python examples/ch20_moe.py")

# %% tags=["remove-cell"]
# 下面几段话引用的事实，就是上面这次运行打印的
main_out = output_of("python examples/ch20_moe.py")
for expected in ("稠密 MLP 的层：[0]", "每层 8 个专家，每个 token 选 2 个", "moe_backend=loop：与 HF 逐 token 相同 3 / 3",
                 "moe_backend=fused：与 HF 逐 token 相同 3 / 3", "缓冲区 36 行"):
    assert expected in main_out, expected

# %% [markdown]
# 值得注意的几处：
#
# - 每个 token 的两个专家权重加起来是 1（`norm_topk_prob`），有的 token 几乎全押在一个专家上。“第 2 名比第 3 名高多少”就是路由离换掉一个专家还差多远：这几个差距远大于换一种求和顺序带来的误差，所以 TP、EP 选出同样的专家。。
# - 5 个 token × 2 = 10 个格子，块大小 4、8 个专家：缓冲区开 10 + 8 × 3 = 34 行、凑成 36 行，不管路由怎样；这次用到 24 行，其余的块是 -1。
#
# ## 与上游的差异
#
# 上游以固定的提交 20fcd7f 为准。
#
# - 我们在 `MoELayer` 里选专家、后端只管算，上游的后端拿到路由 logits 自己选（`topk_softmax`，归一化时分母加 1e-8），因为专家并行要在交给后端之前把别处的专家标成 -1。`python/minisgl/moe/fused.py` · `fused_topk`
# - 我们按 `mlp_only_layers`、`decoder_sparse_step` 挑稠密层，上游每层都建 MoE 块：Qwen3-30B-A3B 两项都空所以没事，有稠密层的配置加载时权重名对不上（文件里是 `gate_proj`，模型要专家）；`test_dense_and_moe_layers_are_the_ones_hf_builds` 查它。`python/minisgl/models/qwen3_moe.py` · `Qwen3DecoderLayer`
# - 我们多了专家并行；我们的 `fused` 是 CPU 上的 C++ 算子（`auto` 编不出它时退回 `loop`），上游的是 Triton 内核，只在 GPU 上跑。`python/minisgl/moe/fused.py` · `fused_experts_impl`
# - 我们的缓冲区在上界 M·k + E·(块大小 − 1) 之外再凑成整块、块大小固定 16，上游开 M·k + (E + 1)·(块大小 − 1) 行、token 不多于专家数时块大小 16，否则 64。`python/minisgl/moe/fused.py` · `get_default_config`
# - 叠专家时我们只等本 rank 的那几个（专家并行），上游等一层的全部专家到齐。`python/minisgl/models/weight.py` · `_get_expert_stack_info`
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - MoE 层：`python/minisgl/layers/moe.py` · `MoELayer`（第 9～59 行）、`python/minisgl/models/utils.py` · `MoEMLP`（第 53～76 行）
# - 路由和排块：`python/minisgl/moe/fused.py` · `fused_topk`（第 9～28 行）、`python/minisgl/moe/fused.py` · `moe_align_block_size`（第 31～89 行）、`python/minisgl/moe/fused.py` · `fused_experts_impl`（第 127～227 行）
# - 模型与加载：`python/minisgl/models/qwen3_moe.py` · `Qwen3MoeForCausalLM`（第 66～80 行）、`python/minisgl/models/weight.py` · `load_weight`（第 75～124 行）
# - 上下文的后端槽位：`python/minisgl/core.py` · `Context`（第 100～122 行）、`python/minisgl/moe/__init__.py` · `create_moe_backend`（第 26～27 行）
#
# ## 测试
#
# 本章的测试在 `tests/test_ch20_moe.py`：路由与 HF 的逐位相同（归一化开、关）；`moe_align_block_size` 在 60 组随机形状上与逐格写出的参照相同，换一份路由缓冲区一样长；两个后端在随机输入上等于 HF 的 MoE 块，一半专家加另一半等于全部；`mlp_only_layers`、`decoder_sparse_step` 的几种取法下，哪几层是 MoE 和 HF 建出来的一样；整个引擎在两个后端、编译后的 decode、TP=2、EP=2 下与 HF 逐 token 相同；服务器起 TP=2、EP=2，官方 `openai` 客户端拿到的回答与 HF 相同；Qwen3-30B-A3B 的配置搭在 meta 设备上数出 30.5B 和 3.3B；坏设置是中文错误。TP 和 EP 的那一个：

# %% tags=["remove-input"]
listing("tests/test_ch20_moe.py", "test_tp2_and_ep2_equal_hf_and_split_the_experts")

# %%
run("python -m pytest -q --color=no tests/test_ch20_moe.py")

# %% [markdown]
# ## 怎么讲清楚
#
# MoE 对引擎的难处只有一个：每个专家分到几行，取决于这一步的数据。挨个专家算就得把路由读回主机，一步的形状随数据变，录不了图；把 (token, 专家) 格子按专家排好、补齐成整块，缓冲区长度只看批大小，图就录得下。多卡时，专家 TP 把每个专家切开，专家并行把整个专家分给 rank、别处的格子标 -1，两种都只在 MoE 层末尾 all-reduce 一次，差别在矩阵乘的宽窄和路由是否均匀。最后一个数说明 MoE 省的是什么：Qwen3-30B-A3B 批大小 64 时，decode 一步期望碰到 128 个专家里的 125.9 个——省算力，不省带宽。

# %% [markdown]
# ## 练习
#
# 1. **激活参数的账**。Qwen3-30B-A3B 的一个 token 用到多少参数？按 `tests/test_ch20_moe.py` 的数法算一遍，说出哪几部分不管路由都要用。
# 2. **块大小的取舍**。块越大，补齐浪费的行越多；块越小，GPU 上的线程块越多。批大小 1、k = 8、E = 128 时，块大小 16 和 64 各要开多长的缓冲区、最多浪费几行？上游为什么在 token 少时用 16？
# 3. **挑战：专家并行的 all-to-all**。本书的 rank 都跑同一批，所以专家并行用一次 all-reduce 收尾。如果注意力也按请求分到各 rank（每个 rank 只有自己那批 token），token 怎样发到专家所在的 rank、再发回来？每层每个 token 要发几次、多少字节？
#
# ??? success "参考答案"
#
#     1. 约 3.35B：注意力、归一化、路由、词嵌入和 LM head 全要用（它们不分专家），专家只用 128 个里的 8 个。总参数 30.53B 里专家占 28.99B，8/128 是 1.81B；其余 1.54B 全部要用（两个 15 万 × 2048 的词表矩阵各 3.1 亿，合计 0.62B；每层的路由 128 × 2048 也要用）。
#     2. 1 个 token × 8 = 8 个格子。块 16：8 + 128 × 15 = 1928，凑成 1936 行（121 块）；最多 8 个专家各占一块，用到 128 行，浪费 120 行。块 64：8 + 128 × 63 = 8072，凑成 8128 行；用到 8 × 64 = 512 行，浪费 504 行——缓冲区和被浪费的算力都跟着块大小涨。token 少时每个专家只分到一两行，块越小浪费越少；token 多时每个专家分到很多行，大块让每个线程块的矩阵乘更有效率。上游的规则是 token 数不多于专家数时用 16，否则 64；本书固定用 16。
#     3. 两次 all-to-all：发出（dispatch）时，每个 rank 把本地每个 token 的 hidden 向量发给它选中的 k 个专家所在的 rank（同一个 rank 上的两个专家只发一次）；算完（combine）时每个专家的输出乘上路由权重发回 token 所在的 rank 相加。每个 token 每层最多发 k 份、收 k 份，每份 hidden × 每个数的字节：Qwen3-30B-A3B 在 bf16 下 2048 × 2 = 4 KB 一份，k = 8 时一个 token 一层来回最多 64 KB；all-reduce 则是每个 token 一层约 2 × 4 KB。发得多，却让每个 rank 只跑自己那批请求的注意力——这是 DeepEP 这类库做的事。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 60   # 把第 60 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 60    # 判题
# python practice/judge.py hint 60    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - MoE 层 = 路由 + E 个专家；每个 token 只用 k 个，输出是它们的加权和。解码层向模型要 MLP，MoE 模型按层号挑。
# - 路由在每个 rank 上算出同样的选择；`select_experts` 的顺序和 HF 一样，权重逐位相同。
# - 挨个专家算要把“谁选了谁”读回主机，录不了图；`moe_align_block_size` 排好、补齐成整块，缓冲区只看形状，decode 能编译。
# - 专家 TP 切开每个专家，专家并行分开整个专家，都是每层一次 all-reduce；前者矩阵乘瘦，后者怕路由不均。
# - 批大小 1 时 MoE 只读 k 个专家，批一大几乎全读：省的是算力，不一定是带宽。
