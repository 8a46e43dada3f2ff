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
# # 第 16 章 张量并行
#
# 模型放不进一张卡，或者一张卡的带宽撑不起想要的延迟，就把每一层的权重切开分给几个进程（几张卡）：这就是[张量并行](../glossary.md#tensor-parallel)（TP）。第 2、3 章的层和加载器早就按 rank 切权重，这一章让它们真的跑在几个进程里，经 [gloo](../glossary.md#gloo) 通信，并处理只有多进程才有的问题：KV 池、随机采样、线程、多机、死掉的 rank。本章的运行证明：TP=2、3、4、16 的输出与单进程、与 Hugging Face 逐 token 相同，每次前向的通信次数正好是 2 × 层数 + 1 次 all-reduce、1 次 all-gather。

# %% tags=["remove-cell"]
from textwrap import indent

from IPython.display import Markdown

from minibook.page import *
setup(16)


def in_fold(md) -> Markdown:
    """缩进 4 格：接在上一个 markdown 单元开头的 ??? 折叠框里。"""
    return Markdown(indent(md.data if isinstance(md, Markdown) else md, "    "))

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 一个 解码层做张量并行，要几次 all-reduce？在哪里？
# 2. 列并行和行并行各切权重的哪一维？MLP 为什么先列后行？
# 3. Qwen3-0.6B 有 8 个 KV 头，TP=16 时每个 rank 放哪个 KV 头？
# 4. 词表并行的嵌入层用 all-reduce，LM head 用 all-gather，为什么不一样？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 两次：o_proj 之后一次，down_proj 之后一次；整个模型再加嵌入层的一次。
#     2. 列并行切输出维，每个 rank 算出一段输出；行并行切输入维，每个 rank 算出完整形状的部分和，要 all-reduce 相加。列并行的输出正好是行并行要的那段输入，中间的 SiLU × up 逐元素算，不用通信。
#     3. 第 r 个 rank 放第 r // 2 个 KV 头：每个 KV 头复制到相邻的两个 rank 上，各自配上自己那个 q 头。
#     4. 嵌入层每个 rank 只查到自己那段词表里的 token，其余位置是 0，相加就是完整的嵌入；LM head 每个 rank 算出自己那段词表的 logits，要的是拼起来的整行，不是和。

# %% [markdown]
# ## 本章要回顾的文件
#
# 切权重的代码早就在了：`layers/linear.py`、`layers/embedding.py`（第 2 章）和 `models/weight.py` 的 `shard_tensor`（第 3 章）；`distributed/` 在第 2 章提前引入、本章讲解。本章修改的 9 个文件在树里标了出来：通信插件、Engine 的进程组和 KV 池、只读本 rank 那一份的加载、调度器与启动器。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch16_tp.py`：先按 Qwen3-0.6B 的 config.json 打印每个 rank 拿到的权重形状，再为 TP=1、2、4（tiny Qwen3）和 TP=1、3（SmolLM2）各起一组真实的进程，比较形状、KV 池、通信次数和 logits。`python tools/steps.py check 16` 会跑它和本章的测试。起一个 TP=2 的服务器：
#
# ```bash
# python tools/steps.py run 16 -- python -c "from minibook.models import tiny_qwen3; print(tiny_qwen3())"
# python tools/steps.py run 16 -- python -m minisgl --model-path <上一行打印的目录> --tp-size 2
# ```
#
# 下面的演示一步步走过一次前向：选一个 TP，用 ←/→ 或点步骤看每个 rank 拿着哪一块权重、哪里的激活是部分和、通信发生在哪里（形状按 Qwen3-0.6B 的 config 算出）。
#
# <div class="tp-stepper" data-config='{"model": "Qwen3-0.6B", "model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "num_hidden_layers": 28, "tie_word_embeddings": true, "tp": [1, 2, 4, 16], "tp_default": 2, "tokens": 8}'><noscript>这里是张量并行的逐步演示，需要 JavaScript。</noscript></div>
#
# ## 一层只通信两次：先列后行
#
# 一个 解码层有两段“矩阵乘夹着逐元素运算”：注意力（qkv_proj → 注意力 → o_proj）和 MLP（gate_up_proj → SiLU × up → down_proj）。Megatron-LM 的切法：第一个矩阵按输出维切（[列并行](../glossary.md#column-row-parallel)），每个 rank 拿一部分头、一段中间维，后面的注意力和 SiLU × up 各算各的；第二个矩阵按输入维切（行并行），每个 rank 算出完整形状的部分和，一次 [all-reduce](../glossary.md#all-reduce) 加起来。

# %% tags=["remove-input"]
listing("minisgl/layers/linear.py", "LinearQKVMerged")

# %% tags=["remove-input"]
listing("minisgl/layers/linear.py", "LinearRowParallel")

# %% [markdown]
# `LinearQKVMerged` 只分配本地的 (本地 q 头 + 2 × 本地 KV 头) × head_dim 行。o_proj 和 down_proj 都是 `LinearRowParallel`，各 all-reduce 一次，所以每层正好两次通信；bias 放在 all-reduce 之后，只加一次。
#
# ## 先切再拼：拼好再切就错了
#
# HF 的 checkpoint 里 q、k、v 是三个矩阵，我们的 qkv_proj 是一个。加载时必须先各自按头切，再在每个 rank 上拼；把拼好的大矩阵切成两半，rank 0 拿到的是全部 q 头，rank 1 拿到的全是 k 和 v。用 tiny Qwen3 第 0 层的真权重看两种做法：

# %%
import torch
from safetensors import safe_open

from minibook.models import tiny_qwen3
from minisgl.models import ModelConfig, shard_tensor

QWEN3 = tiny_qwen3()
cfg = ModelConfig.from_json(QWEN3)
with safe_open(str(QWEN3 / "model.safetensors"), "pt") as f:
    w = {n: f.get_tensor(f"model.layers.0.self_attn.{n}_proj.weight") for n in "qkv"}
x = torch.randn(4, cfg.hidden_size, generator=torch.Generator().manual_seed(0))
d, local_q, local_kv = cfg.head_dim, cfg.num_qo_heads // 2, cfg.num_kv_heads // 2
print(f"{'rank':<6}{'做法':<10}{'q 的最大误差':>14}{'k 的最大误差':>14}{'v 的最大误差':>14}")
for rank in range(2):
    rows = {"q": slice(rank * local_q * d, (rank + 1) * local_q * d),
            "k": slice(rank * local_kv * d, (rank + 1) * local_kv * d)}
    rows["v"] = rows["k"]
    truth = {n: (x @ w[n].T)[:, rows[n]] for n in "qkv"}  # 单卡算出的、这个 rank 该有的那几个头
    right = torch.cat([shard_tensor(f"model.layers.0.self_attn.{n}_proj.weight", w[n], rank, 2,
                                    cfg.num_kv_heads) for n in "qkv"])
    wrong = torch.cat([w["q"], w["k"], w["v"]]).chunk(2)[rank]
    for how, weight in (("先切再拼", right), ("拼好再切", wrong)):
        q, k, v = (x @ weight.T).split([local_q * d, local_kv * d, local_kv * d], dim=-1)
        errs = [(got - truth[n]).abs().max().item() for got, n in zip((q, k, v), "qkv")]
        print(f"{rank:<6}{how:<10}" + "".join(f"{e:>14.2e}" for e in errs))
        if how == "先切再拼":
            assert max(errs) == 0
assert (torch.cat([w["q"], w["k"], w["v"]]).chunk(2)[1][: local_q * d] - w["k"]).abs().max() == 0  # rank 1 的“q”其实是 k

# %% [markdown]
# 先切再拼的误差是 0；拼好再切时只有 rank 0 的 q 和 rank 1 的 v 碰巧在该在的位置，rank 0 的“k”“v”其实是后 8 个 q 头，rank 1 的“q”是全部 k 头。形状都对得上，不会报错，只会悄悄算出错误的 token。流式加载器在读每个张量时就切（`shard_tensor`），凑齐 q、k、v 再拼。
#
# ## 每个 rank 只读自己的那一份
#
# 本章的 `shard_tensor` 接受张量，也接受 safetensors 的切片句柄（`get_slice`）：句柄不读数据，按下标切时才从文件里读出这几行、几列。KV 头比 rank 少时，连续几个 rank 取同一个头（复制）。

# %% tags=["remove-input"]
listing("minisgl/models/weight.py", "shard_tensor")

# %% [markdown]
# main 的第一部分就是用它在 meta 张量上算出的 Qwen3-0.6B 形状表（见下面“运行”）。TP=16 时 k_proj 仍有 128 行：一个完整的 KV 头，两个 rank 各存一份，所以 TP 超过 8 以后每个 rank 的 KV 池不再变小。
#
# ??? note "深入：CPU 上 get_tensor 本来就不读整个张量"
#     上游的 #93 说每个 rank 都读完整的张量再切。量了才知道：safetensors 0.8 在 CPU 上的 `get_tensor` 和 `get_slice` 都是对文件的内存映射，切下来、`clone` 的时候才真正读到那几页，所以老写法在 CPU 上也只读本 rank 那几行所在的页（按列切的 o_proj、down_proj 每一行都要读一段；内核还会顺带预读相邻的页）。差别在别的地方：`get_tensor(..., device="cuda")` 或者旧版本的库会把整个张量拷出来。`get_slice` 在哪里都只读切到的那部分，本章的测试用一个记账的文件句柄检查每个 rank 读出的元素个数正好是它留下的那一份。
#
# ## 词表并行：嵌入求和，LM head 拼接
#
# [词表并行](../glossary.md#vocab-parallel)的嵌入层每个 rank 存一段连续的词表行，查不到的 token 输出 0，all-reduce 一加就是完整的嵌入：

# %% tags=["remove-input"]
listing("minisgl/layers/embedding.py", "VocabParallelEmbedding.forward")

# %% [markdown]
# LM head 每个 rank 算出自己那段词表的 logits，要的是整行而不是和，所以用 [all-gather](../glossary.md#all-gather) 拼起来：

# %% tags=["remove-input"]
listing("minisgl/layers/embedding.py", "ParallelLMHead.forward")

# %% [markdown]
# all-gather 按 rank 把 [批, 本段词表] 叠成 [TP × 批, 本段词表]，所以要先 view 成 [TP, 批, 本段]、换轴，再拼成 [批, 词表]。直接 reshape 成 [批, 词表]，批大小为 1 时恰好对，大于 1 时每一行混进了别的请求的 logits（上游的 #98）。用两个“rank”的随机 logits 看：

# %%
full = torch.randn(3, 8)  # 3 个请求、词表 8
parts = full.chunk(2, dim=1)  # 两个 rank 各算一段词表
gathered = torch.cat(parts, dim=0)  # all_gather 的结果：[2 × 3, 4]
right = gathered.view(2, 3, -1).permute(1, 0, 2).reshape(3, -1)
wrong = gathered.reshape(3, -1)
print("换轴之后与整行相同：", torch.equal(right, full))
print("直接 reshape，每个请求的行对不对：", [torch.equal(a, b) for a, b in zip(wrong, full)])
print("批大小 1 时直接 reshape 对不对：", torch.equal(torch.cat(full[:1].chunk(2, dim=1), 0).reshape(1, -1), full[:1]))
assert torch.equal(right, full) and not torch.equal(wrong, full)

# %% [markdown]
# 本章的测试在真实的两个进程里把 LM head 换成直接 reshape 的写法：批大小 1 的输出仍与 HF 相同，3 和 8 就不同了。
#
# ## 运行
#
# 本章的 main：

# %% tags=["remove-input"]
listing("examples/ch16_tp.py", "rank_main")

# %% [markdown]
# ??? note "main 的其余部分：形状表、起进程、比较"

# %% tags=["remove-input"]
in_fold(listing("examples/ch16_tp.py", "show_shapes"))

# %% tags=["remove-input"]
in_fold(listing("examples/ch16_tp.py", "run_tp"))

# %% tags=["remove-input"]
in_fold(listing("examples/ch16_tp.py", "compare"))

# %%
run("python examples/ch16_tp.py")

# %% [markdown]
# 值得注意的地方：
#
# - 形状表：q_proj、gate_proj 按输出维减半，o_proj、down_proj 按输入维减半，norm 不切；TP=16 时 k_proj 仍是一个完整的 KV 头（128 行），嵌入是 151936 ÷ 16 = 9496 行。
# - KV 池每层的 KV 头数随 TP 变少：TP=4 时每个 rank 存 2 个，SmolLM2 的 TP=3 时存 1 个（513 是 512 页加 1 个占位页）。
# - 一次前向的 all_reduce 是 2 × 层数 + 1：tiny Qwen3 4 层 9 次，SmolLM2 30 层 61 次；all_gather 1 次；TP=1 一次也不通信。
# - logits 与 TP=1 差 1e-5 量级（all-reduce 改变了加法的顺序），贪心生成的 token 全部相同。
#
# ## 各 rank 的批必须一模一样
#
# all-reduce 把各 rank 同一位置的部分和相加。第 14 章说过：只要某个 rank 的批顺序不同，加在一起的就是不同请求的部分和。这次真的试一下：rank 1 把 3 个提示倒过来排（它的第 0 行是 rank 0 的第 2 个请求），其他都不变：

# %%
import sys

sys.path.insert(0, "examples")
from ch16_tp import PROMPTS, run_tp

base = run_tp(str(QWEN3), 1)[0]
swapped = run_tp(str(QWEN3), 2, reversed_on=1)
for i, prompt in enumerate(PROMPTS):
    same = swapped[0]["tokens"][i] == base["tokens"][i]
    print(f"{prompt!r:<28} rank 0 的输出与 TP=1 {'相同' if same else '不同'}")
print(f"prefill 的 logits 与 TP=1 最大差：{abs(swapped[0]['logits'] - base['logits']).max():.1f}")
assert all(swapped[0]["tokens"][i] != base["tokens"][i] for i in range(len(PROMPTS)))
# 每一行两个 rank 加出来的是同一个和，只是 rank 1 把它记在了倒过来的那个请求名下
assert swapped[1]["tokens"] == swapped[0]["tokens"][::-1]

# %% [markdown]
# 三个提示的输出全变了，连排在中间的那个也是：prefill 时一批的 token 首尾相接，它前面那个请求的长度在两个 rank 上不同，它的 token 就落在不同的行上。logits 最大差 29.6，而且没有任何报错。这就是多进程里每一件影响批的事都要在各 rank 上一致的原因。第 14 章让消息一致；本章补上三件：
#
# - **KV 池的页数**：各 rank 量空闲内存的时刻不同、同一台机器上别的进程也在用内存，算出的页数就不同，池子紧张时接纳、逐出的请求就不同。`_agree_on_num_pages` 用一次 all_reduce(MIN) 取最小值（同时得到最大值）；CPU 上同一台机器的几个 rank 共用一份内存，预算先除以本机的 rank 数。
# - **随机采样**：各 rank 的 logits 相同，但随机数发生器只要有一次没对齐，抽出的 token 就不同。`_forward_and_sample` 在有随机采样的批上把 rank 0 的 token 广播给所有 rank（上游 #85 提过同样的做法，没有合并；上游靠每个 rank 相同的种子）。测试故意给两个 rank 不同的种子：token 仍然相同，也与单进程相同。
# - **还资源的顺序**：决定前缀缓存里叶子的时间戳，也就决定以后先逐出谁。结束的请求放在 set 里，迭代顺序取决于对象地址，每个进程都不同；现在按 uid 排序再还。

# %% tags=["remove-input"]
listing("minisgl/engine/engine.py", "Engine._agree_on_num_pages")

# %% [markdown]
# ## 进程组：一个传张量，一个传控制
#
# Engine 在 TP > 1 时建两个进程组：默认组传层里的张量（GPU 上 NCCL，CPU 上 gloo），另一个 gloo 组（[控制组](../glossary.md#control-group)）传 CPU 上的小整数（KV 页数、第 14 章每一步的消息条数）。CPU 上也要分开：重叠调度时 all-reduce 在工作线程上发出，条数的广播在调度器线程上发出，两个线程往同一个组里发集合通信，各 rank 上两者的先后不一定相同，就会互相配错。

# %% tags=["remove-input"]
listing("minisgl/engine/engine.py", "Engine._init_distributed")

# %% [markdown]
# 两个组都带超时（默认 60 秒；torch 自己的默认，gloo 是 30 分钟）：建组时等不齐，或者某个 rank 死了、卡住，别的 rank 在这个时间内报错退出，不会永远卡在通信里。
#
# ??? note "深入：死了和卡住不一样；启动之前就能查出的错"
#     在 gloo 上，被 kill -9 的 rank 的套接字随进程关闭，其余 rank 在下一次通信时立刻报错；被 SIGSTOP 的 rank 连接还在，要等到超时。NCCL 走 NVLink 或共享内存时察觉不到对端已死，两种情况都要等超时。测试两种都试了。启动器还在起任何进程之前检查 TP 数切不切得开模型（SmolLM2 的 `--tp-size 2` 是一行中文错误），每个 rank 只用 核数 ÷ 本机 rank 数 个线程（n 个进程各用满所有核，就是 n 倍的线程抢同样的核）。
#
#     GPU 上的两个进程组由 `examples/gpu_smoke.py` 的第 6 节检查：它在一块 H200 上跑过，NCCL 默认组加 gloo 控制组，通信器的 all_reduce、all_gather、broadcast 在显存里的张量上结果都对（world size 1）；两个 rank 各占一块卡的 NCCL 生成要两块卡，还没有在 GPU 上跑过。
#
# 通信本身在插件里，层只认 `DistributedCommunicator`：

# %% tags=["remove-input"]
listing("minisgl/distributed/impl.py", "TorchDistributedImpl")

# %% [markdown]
# 第 2 章的注释写着“gloo 没有 all_gather_into_tensor”，那是旧版本 torch 的情况。问一下装着的版本：

# %%
import torch.distributed as dist

print("torch", torch.__version__)
print("有 all_gather_single：", hasattr(dist, "all_gather_single"))
print("all_gather_into_tensor 的文档：", (dist.all_gather_into_tensor.__doc__ or "").strip().splitlines()[0])

# %% [markdown]
# 装着的 torch 有新名字 `all_gather_single`，旧名字 `all_gather_into_tensor` 调用时会发弃用警告，所以优先用新名字；gloo 真能收进一个张量，由本章的测试检查。
#
# ??? note "深入：旧版本的 torch 怎么办"
#     `gather_into_one_tensor` 第一次调用时用一个小张量真的试一次（所有 rank 同时试），试不通就以后都退回“收进一组张量再拼”。本章的测试检查两个 rank 都走了收进一个张量的路，而且没有警告。
#
# ## 量一量：2 个核上，通信比计算还贵
#
# `examples/ch16_comm.py` 起真实的 gloo 进程（每个 1 个 torch 线程），先量一次集合通信要多少微秒：

# %%
# NBVAL_IGNORE_OUTPUT
from ch16_comm import (allreduce_latency, decode_step_times, load_peak_memory, print_decode,
                       print_exercise, print_latency, print_memory)

latency = {w: allreduce_latency(w, repeats=30) for w in (2, 3)}
print_latency(list(latency.values()))
plt = pyplot()
for w, res in latency.items():
    xs = [r["bytes"] for r in res["all_reduce"]]
    plt.plot(xs, [r["median_us"] for r in res["all_reduce"]], marker="o", label=f"{w} 个 rank，中位数")
    plt.fill_between(xs, [r["min_us"] for r in res["all_reduce"]], [r["p90_us"] for r in res["all_reduce"]],
                     alpha=0.15)
plt.xscale("log")
plt.yscale("log")
plt.xlabel("每个 rank 的数据量（字节）")
plt.ylabel("一次 all_reduce（µs）")
plt.title("gloo 上的 all_reduce：阴影是最快一次到 p90")
plt.legend()
plt.show()

# %% [markdown]
# 2 个 rank、小数据时一次 all-reduce 的中位数不到 1 ms，几乎不随数据量变：花的是进程之间的往返和唤醒，不是搬数据；过了几百 KiB 才开始按带宽增长。3 个 rank 比核多，要轮流上 CPU，更慢。再把真引擎放进来，关掉重叠调度，量每一步 decode 的时间和其中花在通信上的时间（计时包在通信插件外面，也就是换通信库时替换的那一层）：

# %% tags=["milestone"]
# NBVAL_IGNORE_OUTPUT
from minibook.models import smollm2

SMOL = smollm2()
for name, path, tp in (("tiny Qwen3", QWEN3, 2), ("SmolLM2-135M", SMOL, 3)):
    rows = decode_step_times(path, [1], [1, 8], steps=8, threads_per_rank=1)
    rows += decode_step_times(path, [tp], [1, 8], steps=8)
    print_decode(name, rows, ModelConfig.from_json(path).num_layers)
    assert all(r["calls_per_forward"]["all_reduce"] == (2 * ModelConfig.from_json(path).num_layers + 1) * (r["tp"] > 1)
               for r in rows)
print_memory(SMOL, {tp: load_peak_memory(SMOL, tp) for tp in (1, 3)})
print_exercise(latency)

# %% [markdown]
# 在这台 2 核的机器上，TP 只是为了算得对，不是为了快：
#
# - 通信占了前向的一半以上（TP=2）到八成（TP=3）。引擎里每次通信比单独量的还慢：它包括等慢的 rank 赶上来，TP=3 的 3 个进程还挤在 2 个核上。
# - 所以 TP>1 每步比 TP=1（同样 1 个线程）慢。每步的通信次数和算出的 token 都与预期一致，这才是这台机器能证明的。
# - 内存按预期变少：TP=3 每个 rank 自己持有的权重约是整个模型的三分之一；读文件时摸到的文件页远多于它那一份，那是几个 rank 共用的页缓存，不占各自的内存。
# - 最后几行是练习 1 的答案（先做练习再看）：同样 160 次 all-reduce，NVLink 上光带宽时间就是 0.65 ms，本机的 gloo 上要几百毫秒。GPU 上 TP 划算，是因为每个 rank 少读的权重省下的时间远多于几微秒一次的通信。
#
# ## 多机：同样的命令，换一个 --node-rank
#
# [多机张量并行](../glossary.md#multi-node-tp)的启动器收 SGLang 的三个命令行参数：`--nnodes`、`--node-rank`、`--dist-init-addr`。每台机器跑同一条命令，只有 `--node-rank` 不同；0 号机器跑 API server、tokenizer 进程和本机的 rank，其他机器只跑本机的 rank。
#
# ```bash
# # 机器 A（10.0.0.1，0 号：API server、tokenizer 进程和 rank 0）
# python -m minisgl --model-path /models/Qwen3-0.6B --tp-size 2 --nnodes 2 --node-rank 0 \
#     --dist-init-addr 10.0.0.1:5000 --host 0.0.0.0 --port 1919
# # 机器 B（1 号：只有 rank 1，没有 HTTP）
# python -m minisgl --model-path /models/Qwen3-0.6B --tp-size 2 --nnodes 2 --node-rank 1 \
#     --dist-init-addr 10.0.0.1:5000
# ```
#
# 本章的测试用两个 Linux 网络命名空间当两台机器，一对 veth 连起来，各跑一个 rank：openai 客户端从 0 号机器拿到的回答与 HF 相同。
#
# ??? note "深入：多机时改了哪两处；两台真机器要注意什么；0 号机器停了之后"
#     rank 0 转发消息的 PUB 套接字从 IPC 文件换成 `dist-init-addr` 的端口 + 1；gloo 要知道走哪块网卡（很多机器把主机名解析成 127.0.0.1），Engine 问内核去 rank 0 那台机器走哪个本机地址，把这个地址所在的网卡名设成 `GLOO_SOCKET_IFNAME`。
#
#     两台机器要有同样的代码和各自的一份模型，在 `--dist-timeout`（默认 60 秒）之内先后启动；防火墙要放行 5000、5001 和 gloo 在两台机器之间随机选的端口；自动选的网卡不对时，自己设 `GLOO_SOCKET_IFNAME`（GPU 上还有 `NCCL_SOCKET_IFNAME`）。1 号机器收不到 SIGTERM，也等不来任何消息：它的启动器每秒连一下 0 号机器的会合端口（rank 0 进程里的 TCPStore），连不上就带着退出码 1 退出。测试停掉 0 号机器后检查了这一点，而且两台机器一个进程都不留。
#
# ## 与上游的差异
#
# 上游以固定的提交 20fcd7f 为准。
#
# - 我们有随机采样时由 rank 0 广播 token，上游靠每个 rank 相同的 `torch.manual_seed(42)`，因为种子相同不保证随机数发生器在每个 rank 上走得一样。`python/minisgl/engine/engine.py` · `Engine.__init__`
# - 我们在 all-reduce 之后加 bias，上游在之前加（TP 个 rank 各加一次），因为 bias 只该加一次；上游的模型都不带 bias，所以没出过错。`python/minisgl/layers/linear.py` · `LinearRowParallel`
# - 我们只有 torch.distributed 一种通信，上游在 GPU 上默认用自己编译的 PyNCCL 插件（预先分配通信缓冲区），因为 PyNCCL 要 GPU 和编译好的扩展，本书的 CPU 环境跑不了；插件接口一样，追加到 `plugins` 就能换。`python/minisgl/distributed/impl.py` · `enable_pynccl_distributed`
# - 我们支持多机（`--nnodes`），上游的会合地址写死在 127.0.0.1，因为多机只多出会合地址和网卡两件事，值得让读者看到。`python/minisgl/engine/config.py` · `EngineConfig.distributed_addr`
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 线性层：`python/minisgl/layers/linear.py` · `LinearQKVMerged`（第 71～88 行）、`python/minisgl/layers/linear.py` · `LinearRowParallel`（第 109～127 行）
# - 切分与合并：`python/minisgl/models/weight.py` · `_shard_tensor`（第 34～52 行）、`python/minisgl/models/weight.py` · `load_weight`（第 75～124 行）
# - 词表并行：`python/minisgl/layers/embedding.py` · `VocabParallelEmbedding`（第 14～42 行）、`python/minisgl/layers/embedding.py` · `ParallelLMHead`（第 45～110 行）
# - 通信插件：`python/minisgl/distributed/impl.py` · `DistributedCommunicator`（第 63～70 行）、`python/minisgl/distributed/impl.py` · `enable_pynccl_distributed`（第 73～90 行）
# - 进程组与 KV 池：`python/minisgl/engine/engine.py` · `Engine._init_communication`（第 112～137 行）、`python/minisgl/engine/engine.py` · `Engine._sync_get_memory`（第 170～189 行）
#
# ## 测试
#
# 本章的测试在 `tests/test_ch16_tp.py`，每个 rank 都是真实的进程，上面每一条都有：与 HF 相同（批大小 1、3、8，TP=16，服务器的 TP=2、3、4，两个网络命名空间里的多机）；各 rank 一致（KV 页数、线程、采样、还资源的顺序）；出错时在有限时间内退出；加载只读自己那一份。页面上只跑快的；TP=16、起服务器的 TP=2、3、4 和两个网络命名空间各要 10～40 秒，留给 `steps.py check 16`。死一个 rank 的那个：

# %% tags=["remove-input"]
listing("tests/test_ch16_tp.py", "test_when_a_rank_dies_or_hangs_the_others_exit_in_bounded_time")

# %%
run('python -m pytest -q --color=no tests/test_ch16_tp.py -k "not tp16 and not served and not namespaces"')

# %% [markdown]
# ## 怎么讲清楚
#
# 张量并行就是把每层的矩阵乘切给几个 rank，通信只放在非加不可的地方。注意力按头切、MLP 按中间维切，第一个矩阵列并行、第二个行并行，每层两次 all-reduce，嵌入层再一次，LM head 一次 all-gather。合并的 qkv 先切再拼，KV 头不够分就复制。多进程还要求每个 rank 的批完全一样：消息、KV 页数、采样出的 token、还资源的顺序都得一致，否则 all-reduce 加的是别的请求的部分和。

# %% [markdown]
# ## 练习
#
# 1. **70B 的通信账**。Llama-3.1-70B（80 层、hidden 8192、bf16）在 TP=8、decode 批大小 64 时，每次 all-reduce 多少数据？NVLink 单向 450 GB/s 时一步 decode 的通信大约多少时间？
# 2. **切不开的头数**。Qwen2.5-0.5B 有 14 个 q 头、2 个 KV 头，`--tp-size 4` 会在哪里报错？想支持它有哪些办法？
# 3. **挑战：PyNCCL 插件**。用 ctypes 加载 libnccl.so，写一个 `DistributedImpl`，用 `ncclAllReduce` 实现 all_reduce，在两块 GPU 上和 torch.distributed 比较结果与延迟。
#
# ??? success "参考答案"
#
#     1. [64, 8192] 个 bf16 是 1 MiB；ring all-reduce 每个 rank 发约 2 × 7/8 × 1 MiB ≈ 1.75 MiB，约 4 µs 的带宽时间，加上每次几微秒的启动延迟。每步 80 × 2 = 160 次（嵌入层再 1 次），合计约 1～2 ms：小批量时固定延迟占大头，所以 decode 的 TP 不宜太大。
#     2. `EngineConfig.check_tp_split`：启动器在起进程之前就报“query 头有 14 个，不能平均分给 4 个 rank”，并列出能用的 TP 数 1、2。办法：只用这两个；或者在每组 7 个 q 头后面各补 1 个空头（权重和 o_proj 对应的列填 0），凑成 16 个，GQA 的分组不变。
#     3. rank 0 用 `ncclGetUniqueId` 生成 id，经 gloo 控制组广播；各 rank `ncclCommInitRank`；all_reduce 调 `ncclAllReduce`，传当前的 CUDA 流。上游的 `kernel/pynccl.py` 和 SGLang 的 `pynccl_wrapper.py` 都这样做。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 48   # 把第 48 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 48    # 判题
# python practice/judge.py hint 48    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - Megatron 切法：先列并行（按头、按中间维）、再行并行，每层两次 all-reduce，嵌入层一次，LM head 一次 all-gather。
# - 合并的 qkv 先切再拼；KV 头不够分时复制；每个 rank 从文件里只读自己的那一份。
# - 各 rank 的批必须一样：消息（第 14 章）、KV 页数（取最小值）、采样出的 token（以 rank 0 为准）、还资源的顺序（按 uid）。
# - 张量走默认组，控制走单独的 gloo 组；两个组都有超时，死了或卡住的 rank 不会让别的 rank 永远等。
