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
# # 第 6 章 Engine 与采样器
#
# 到第 5 章为止，零件都齐了：能在 meta 设备上搭起来的模型、按 rank 流式切分的权重、一整块的 KV 池、按页分配槽位的 `PageAllocator`、记录槽位的页表、会按页表取回 K/V 的注意力后端。可每个例子都在开头手工把它们拼一遍，顺序、尺寸、谁先谁后全靠写例子的人心里有数。这一章把“拼”这件事收进一个类：`Engine` 按固定的顺序装配一次，之后只做一件事——给它一个准备好的批次，它做一次前向，并为批里每个请求采样出下一个 token。采样由 `Sampler` 负责：贪心、温度、top-k、top-p，一批里每个请求各用各的参数，还要能用种子复现。调度器要到第 7 章才写，所以本章的 main 手写了一个二十来行的“迷你调度器”来驱动 Engine：4 个长短不一的提示放进同一批生成，请求陆续结束、批一步步变小，输出与 Hugging Face 逐 token 一致。

# %% tags=["remove-cell"]
from minibook.page import *
_ = setup(6)  # 赋值而不显示：返回的树路径随机器而变

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. Engine 为什么先在 meta 设备上建模型、再装权重？KV 池的大小为什么必须等权重装完才能定？
# 2. 页表是什么形状、什么 dtype？为什么比 `max_running_req` 多一行？KV 池页数的上限 `max_running_req × ⌈max_seq_len ÷ page_size⌉` 是怎么来的？
# 3. `forward_batch` 做什么、不做什么？它返回的 `ForwardOutput` 为什么既有设备上的 token、又有一份 CPU 副本和一个 CUDA 事件？
# 4. top-p 的判据写成“排在它前面的概率之和 ≥ p 就丢掉”。为什么这样总能留下至少一个 token？换成“累积到它自己为止 ≥ p 就丢掉”会出什么事？
# 5. 一个请求生成满以后，本章的 main 用 `free_slots(page_table, row, cached_len)` 还回它的页，而不是 `device_len`。为什么？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 在 meta 设备上建模型只记形状和 dtype，一个字节都不分配；随后流式加载器按本 rank 切好每个张量，`load_state_dict` 把它们整个“换”上去。这样内存里只有一份权重，不会先随机初始化一份再覆盖。KV 池用的是“装完权重后还剩多少内存”乘以 `memory_ratio`：权重不先落地，就不知道剩多少。
#     2. `[max_running_req + 1, max_seq_len]` 的 int32 张量，第 `row` 行第 `pos` 列是那个请求第 `pos` 个 token 的 K/V 槽位。多出的最后一行不发给真实请求，留给第 18 章图捕获时补齐批大小用的占位请求。上限：页表最多同时有 `max_running_req` 行在用，每行最多 `max_seq_len` 个 token、占 `⌈max_seq_len ÷ page_size⌉` 页；池子比这还大，多出的页永远分不出去。
#     3. 它在 `ctx.forward_batch(batch)` 里调用 `model.forward()` 得到 logits，去掉补齐的占位行，交给采样器，返回下一个 token。它不选请求、不分配槽位、不准备 input_ids 和注意力元数据、不改请求的记账、不释放任何东西——这些都是调度器的事。GPU 上读一个设备张量的值会让 CPU 等 GPU 把前面排队的活全干完；异步拷回 CPU 加一个事件，调度器就可以先去准备下一步，真要用 token 时再等这个事件（第 11 章的重叠调度靠的就是它）。
#     4. 第 1 名前面什么都没有，它的“前面之和”是 0，而 `SamplingParams` 保证 `p > 0`，所以第 1 名永远留下。换成“累积到自己 ≥ p”，第 1 名的概率一旦 ≥ p 就会被删掉——p 较小时整行都被删光，`multinomial` 直接报错；p 较大时也会少留一个“跨过 p 的那个” token，留下的集合概率和不到 p。
#     5. 最后一次采样出的 token 让请求生成满，它再也不会被送进模型，K/V 从没写进 KV 池，页表里那一格也从没分配过。请求结束时 `cached_len = device_len − 1`，真正占着槽位的只有 `[0, cached_len)`；按 `device_len` 去还，会去读页表里一个没分配过的格子。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章新建 `minisgl/engine/` 这个包：`config.py` 是配置，`engine.py` 是装配和前向，`sample.py` 是采样器。main 和基准测试在 `examples/` 下。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch06_engine.py`。它为 SmolLM2 和 tiny Qwen3 各建一个 Engine，把 4 个长短不一的提示（最多生成 12、6、10、3 个 token）放进同一批：先一起 prefill，再逐步 decode 还没生成满的请求，与 Hugging Face 的贪心输出逐 token 比较；最后用同一个种子和不同的种子各跑一次随机采样，检查可复现性。它只用到上面这棵树里的文件；`python tools/steps.py check` 会逐章搭出这棵树、跑这个 main 和树里的全部检查。只想跑这一个 main：
#
# ```bash
# python tools/steps.py run 6 -- python examples/ch06_engine.py
# ```
#
# 调度器是第 7 章的事，这里的 `generate` 就是一个手写的迷你调度器，整章都围绕它转：

# %% tags=["remove-input"]
listing("examples/ch06_engine.py", "generate")

# %% [markdown]
# 循环体的四段就是以后真调度器一步的四段：准备批次（`prepare_batch`，下文细讲）、交给 Engine 前向并采样、把新 token 记回请求和 token pool、释放生成满的请求。Engine 只出现在第二段。
#
# ## Engine 的构造顺序
#
# ![左：Engine.__init__ 的十个步骤，按“登记与设备”“模型”“KV 池与页表”“执行部件”着色；右：设备内存里权重和 KV 池各占的一块，KV 池 = 加载完权重后剩余内存 × memory_ratio](../assets/ch06_engine_init.svg)
#
# 先看配置。`EngineConfig` 是冻结的 dataclass，构造时就把明显的坏值挡掉；`model_config` 从模型目录的 `config.json` 读出来并缓存：

# %% tags=["remove-input"]
listing("minisgl/engine/config.py", "EngineConfig")

# %% [markdown]
# CPU 上默认 float32，这样和 Hugging Face 的参照逐 token 对得上；`max_running_req` 是同时在跑的请求数上限，也就是页表的行数；`num_page_override` 和 `max_seq_len_override` 让测试和演示用很小的池子和页表，不必按整机内存去分配。
#
# 构造函数本身只有二十来行，但顺序几乎不能动：

# %% tags=["remove-input"]
listing("minisgl/engine/engine.py", "Engine.__init__")

# %% [markdown]
# | 步 | 做什么 | 为什么在这里 |
# | --- | --- | --- |
# | 1 | `set_tp_info(rank, size)` | 第 2 章的线性层、嵌入层在**构造时**就用 `get_tp_info()` 算本 rank 的形状；加载器按它切权重；KV 池按它算本地 KV 头数。登记晚了，前面建出的东西全是单卡的形状 |
# | 2 | 选设备；TP>1 时建进程组 | 之后每个张量都建在这块设备上；进程组要在第一次通信之前建好（第 16 章） |
# | 3 | `Context(page_size)`，`set_global_ctx` | 层在**前向时**从全局上下文拿批次和后端。它和建模型的先后其实不严格，但必须早于后面把 KV 池、页表、后端挂上去 |
# | 4 | meta 设备上 `create_model` | 只有形状，不分配内存，下一节细看 |
# | 5 | `load_weight` → `load_state_dict` | 真权重落地。之后“设备上还剩多少内存”才有意义 |
# | 6 | `_decide_num_pages`，建 KV 池 | 用第 5 步之后的剩余内存定页数 |
# | 7 | 页表 `[max_running_req + 1, max_seq_len]` | 每行一个请求；最后一行留给第 18 章补齐批次的占位请求 |
# | 8 | `PageAllocator(num_pages, page_size)` | 要知道第 6 步定下的页数 |
# | 9 | 注意力后端 | 它读写的 KV 池和页表此时都有了；三样东西一起挂到 `ctx` 上 |
# | 10 | `Sampler(device, vocab_size, seed)` | 最后建，它只依赖设备和词表大小 |
#
# 在 tiny Qwen3 上建一个小 Engine，看看装配出了什么：

# %%
import sys

import torch

sys.path.insert(0, "examples")  # 本章 main 里的 prepare_batch / generate
from minibook.models import qwen3_06b_config, smollm2, tiny_qwen3
from minisgl.core import get_global_ctx
from minisgl.engine import Engine, EngineConfig

engine = Engine(EngineConfig(model_path=tiny_qwen3(), max_running_req=4, page_size=4,
                             num_page_override=32, max_seq_len_override=64))
c = engine.model_config
print(f"模型：{c.architecture}，{c.num_layers} 层，{c.num_qo_heads} 个 q 头，"
      f"{c.num_kv_heads} 个 KV 头，head_dim {c.head_dim}，词表 {c.vocab_size}")
print(f"KV 池：{tuple(engine.kv_cache.kv_buffer.shape)} = [K/V, 层, 槽位, KV 头, head_dim]，"
      f"{engine.kv_cache.kv_buffer.dtype}")
print(f"页表：{tuple(engine.page_table.shape)}，{engine.page_table.dtype}")
print(engine.page_allocator)
print(f"注意力后端：{type(engine.attn_backend).__name__}")
print(f"采样器的种子：{engine.sampler.generator.initial_seed()}")
print(get_global_ctx())

ctx = get_global_ctx()
assert ctx is engine.ctx and ctx.kv_cache is engine.kv_cache
assert ctx.page_table is engine.page_table and ctx.attn_backend is engine.attn_backend
assert engine.page_table.shape == (4 + 1, 64)  # 多出一行
assert engine.kv_cache.num_slots == 32 * 4  # 32 页 × 每页 4 个 token

# %% [markdown]
# 32 页、每页 4 个 token，KV 池正好 128 个槽位；页表 5 行 64 列，4 行给请求，1 行留作占位。`Context` 这时还没有批次（`batch=None`），KV 池、页表、后端已经挂在它身上，层在前向时从那里取。
#
# ## 模型先建在 meta 设备上

# %% tags=["remove-input"]
listing("minisgl/engine/engine.py", "Engine._load_model")

# %% [markdown]
# `with torch.device("meta")` 之内创建的张量只有形状和 dtype，没有存储。第 2 章的层都用 `torch.empty` 建权重，所以整棵模型树在 meta 设备上“建好”几乎不花时间、不占内存。随后 `load_weight` 一个张量一个张量地从 safetensors 里读出来，先按本 rank 切片（`shard_tensor`），再把 q/k/v、gate/up 合并，最后 `load_state_dict` 把真张量**替换**到对应的属性上（第 3 章）。
#
# 省掉的是什么？普通的 `nn.Module` 写法是先按默认初始化分配一份随机权重，再把文件里的值拷进去：同一时刻内存里有两份，而且随机初始化本身对大模型就要几十秒。TP 时还有第二笔账：每个 rank 只需要自己那一片，先建完整的层再切，就要先装下完整的模型。流式加载的峰值只比本 rank 的权重多一个未切分的张量。

# %%
from minisgl.models import create_model

with torch.device("meta"):
    skeleton = create_model(engine.model_config)
meta_state, real_state = skeleton.state_dict(), engine.model.state_dict()
numel = sum(t.numel() for t in meta_state.values())
print(f"{len(meta_state)} 个权重张量，{numel:,} 个参数；在 meta 上全都没有存储："
      f"{all(t.is_meta for t in meta_state.values())}")
for name in list(meta_state)[:3]:
    print(f"  {name:<45} {str(tuple(meta_state[name].shape)):<13} meta → {real_state[name].device}")
real_bytes = sum(t.numel() * t.element_size() for t in real_state.values())
print(f"Engine 里的真权重：{real_bytes / 2**20:.1f} MiB（float32）")
assert set(meta_state) == set(real_state) and real_bytes == numel * 4

# %% [markdown]
# 注意第三行的 `qkv_proj`：形状 `(1024, 256)` 是 16 个 q 头和 2 × 8 个 KV 头、每头 32 维拼起来的，文件里并没有这个名字，是加载器合并出来的。tiny Qwen3 共享嵌入（`tie_word_embeddings`），输出层直接用 `embed_tokens`，所以没有单独的 `lm_head.weight`。
#
# ## KV 池多大：内存预算与页表上限
#
# 一页 KV 的字节数只取决于模型结构和 dtype：

# %% tags=["remove-input"]
listing("minisgl/engine/engine.py", "Engine.kv_bytes_per_page")

# %% tags=["remove-input"]
listing("minisgl/engine/engine.py", "Engine._decide_num_pages")

# %% [markdown]
# 页数有两种定法。测试和演示直接给 `num_page_override`；否则按内存预算：**装完权重之后**设备上可用的内存，乘以 `memory_ratio`（默认 0.3），除以每页字节数。剩下的 1 − `memory_ratio` 留给前向时的激活、临时张量，以及这台机器上的别的东西——在 CPU 上“可用内存”是整机的 `MemAvailable`，操作系统和其他进程都在用它，所以默认比例取得保守。
#
# 预算之外还有一个上限：所有页表行都写满时需要的页数 `max_running_req × ⌈max_seq_len ÷ page_size⌉`。页表决定了“同时最多能有多少个 token 在用”，池子比这还大，多出的页永远分不出去，白占内存。在 CPU 上跑小模型，这个上限常常比预算先碰到。
#
# 可用内存从哪里来：

# %% tags=["remove-input"]
listing("minisgl/engine/engine.py", "_free_memory")

# %% [markdown]
# 每个 token 的 KV 是“K 和 V 两份 × 层数 × KV 头数 × head_dim × 每个数的字节数”。拿本书的 SmolLM2 和 Qwen3-0.6B（`config.json` 是仓库里的一个事实文件，不需要权重）算一下，假设装完权重后有 4 GiB 预算、`page_size = 16`、`max_running_req = 16`、`max_seq_len` 取模型的上限：

# %%
from IPython.display import Markdown
from minisgl.models import ModelConfig
from minisgl.utils import div_ceil


def kv_bytes_per_token(cfg: ModelConfig, dtype: torch.dtype) -> int:
    """K 和 V 两份 × 层数 × KV 头数 × head_dim × 每个数的字节数（TP=1）。"""
    itemsize = torch.empty(0, dtype=dtype).element_size()
    return 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * itemsize


budget, page_size, max_running_req = 4 * 2**30, 16, 16
models = {"SmolLM2-135M": ModelConfig.from_json(smollm2()),
          "Qwen3-0.6B": ModelConfig.from_json(qwen3_06b_config())}
rows = ["| 模型 | dtype | 每 token 的 KV | 4 GiB 够几页 | 页表上限 | 最终页数 | 能放的 token |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
for name, cfg in models.items():
    for dtype in (torch.float32, torch.bfloat16):
        per_token = kv_bytes_per_token(cfg, dtype)
        by_budget = budget // (per_token * page_size)
        cap = max_running_req * div_ceil(cfg.max_position_embeddings, page_size)
        pages = min(by_budget, cap)
        rows.append(f"| {name} | {str(dtype).removeprefix('torch.')} | {per_token / 1024:.1f} KiB"
                    f" | {by_budget:,} | {cap:,} | **{pages:,}** | {pages * page_size:,} |")

# 同一个公式与 Engine 的实现对得上：tiny Qwen3 一页（4 个 token）的字节数，以及整个池子
assert engine.kv_bytes_per_page() == kv_bytes_per_token(engine.model_config, torch.float32) * 4
assert engine.kv_cache.kv_buffer.nbytes == engine.num_pages * engine.kv_bytes_per_page()
Markdown("\n".join(rows))

# %% [markdown]
# 几个值得记住的数：
#
# - SmolLM2 只有 3 个 KV 头、head_dim 64，每个 token 的 KV 在 bf16 下只要 22.5 KiB；Qwen3-0.6B 有 8 个 KV 头、head_dim 128，是它的 5 倍，112 KiB。模型参数只差 4 倍多，KV 却主要看“层数 × KV 头数 × head_dim”：GQA 把 KV 头从 16 减到 8，这张表里 Qwen3 那两行就减了一半。
# - SmolLM2 在 bf16 下，4 GiB 够放 11,650 页，可页表最多只用得到 16 × 8192 ÷ 16 = 8,192 页：上限先碰到，页数取 8,192。换成 float32 或换成 Qwen3，预算先碰到。
# - 同样 4 GiB，Qwen3-0.6B 的 bf16 只放得下约 3.7 万个 token，16 个请求平均每个 2,300 个——这就是 KV 池在 decode 阶段决定批大小上限的方式，也是第 9 章前缀缓存、第 16 章张量并行（每个 rank 只存自己的 KV 头）要省的东西。
#
# 用真 Engine 走一遍预算分支：不给 `num_page_override`，页表只有 4 行 × 64 列、每页 4 个 token，上限是 4 × 16 = 64 页；这台机器剩余内存的 30% 远远不止 64 页（tiny Qwen3 一页才 32 KiB），所以页数就是上限。

# %%
engine.shutdown()
budget_engine = Engine(EngineConfig(model_path=tiny_qwen3(), max_running_req=4, page_size=4,
                                    max_seq_len_override=64))  # 没有 num_page_override：按预算
print(f"一页 {budget_engine.kv_bytes_per_page() // 1024} KiB；页表上限 4 × 64 ÷ 4 = 64 页；"
      f"实际分到 {budget_engine.num_pages} 页")
assert budget_engine.num_pages == 64
budget_engine.shutdown()

# %% [markdown]
# ## forward_batch：只算，不排
#
# ![一步生成：调度器的 prepare_batch 准备 input_ids、positions、out_loc、注意力元数据和采样参数；Engine.forward_batch 前向并采样，返回 ForwardOutput；调度器把新 token 写回 token pool、更新请求、释放生成满的请求；下方是本章 main 每一步的批大小](../assets/ch06_step.svg)
#
# Engine 对外只有一个干活的方法：

# %% tags=["remove-input"]
listing("minisgl/engine/engine.py", "Engine.forward_batch")

# %% [markdown]
# 它做的事情一共四件：进入 `ctx.forward_batch(batch)`，让层能读到当前批次；在 `torch.inference_mode()` 里调 `model.forward()`，得到每个请求一行的 logits（prefill 时输出层只取每个请求的最后一个位置，第 2 章）；丢掉补齐出来的占位行（`logits[:batch.size]`，第 18 章才会有占位行，现在 `padded_reqs` 就是 `reqs`）；采样。
#
# 它**不做**的事情更值得记住，因为它们全落在调度器身上（本章是 main 里的 `prepare_batch` / `generate`，第 7 章起是 `Scheduler`）：
#
# - 选哪些请求进这一批、prefill 还是 decode；
# - 给这一步的 token 分配 KV 槽位、写页表（`out_loc`）；
# - 拼 `input_ids`、`positions`，准备注意力元数据；
# - 把新 token 写回 token pool、`complete_one()`、`append_host()`；
# - 请求结束时还页、还页表的行。
#
# 这样分工的好处是 Engine 从不修改请求和调度器的状态：它读批次、写 KV 池，交回的是张量。调度策略怎么变——第 7 章的简单循环、第 10 章的分块 prefill、第 11 章的重叠调度、第 14 章的多 rank 同步——`forward_batch` 的接口都不用变。调度器那一侧的准备工作是这样的：

# %% tags=["remove-input"]
listing("examples/ch06_engine.py", "prepare_batch")

# %% [markdown]
# 每个请求这一步算的是 `[cached_len, device_len)`（第 1 章）：`alloc_slots` 给这些位置分配槽位、顺手写进页表的这一行，返回的槽位就是 `out_loc`，注意力后端会把这一步的 K/V 写到那里（第 4、5 章）。`input_ids` 不是从 `req.input_ids`（CPU 上）拼的，而是从 **token pool** 取：它和页表同形状、在设备上，`(row, pos)` 存那个位置的 token id。新采样出的 token 写回 token pool，下一步直接在设备上取，CPU 上的 `input_ids` 晚一点追加也不耽误（第 11 章重叠调度的前提）。
#
# 手工跑一步 prefill，看看 Engine 交回来的东西，以及它**没有**碰什么：

# %%
from ch06_engine import generate, prepare_batch
from minisgl.core import Req, SamplingParams
from minisgl.scheduler.table import TableManager

engine = Engine(EngineConfig(model_path=tiny_qwen3(), max_running_req=4, page_size=4,
                             num_page_override=32, max_seq_len_override=64))
table = TableManager(engine.config.max_running_req, engine.page_table)
prompt = [504, 3458, 282, 4649, 314]
row = table.allocate()
table.token_pool[row, :len(prompt)] = torch.tensor(prompt, dtype=torch.int32)
req = Req(input_ids=torch.tensor(prompt, dtype=torch.int32), table_idx=row, cached_len=0,
          output_len=3, uid=0, sampling_params=SamplingParams(max_tokens=3), cache_handle=None)

batch = prepare_batch(engine, table, [req], "prefill")
print("input_ids:", batch.input_ids.tolist(), " positions:", batch.positions.tolist(),
      " out_loc:", batch.out_loc.tolist())
out = engine.forward_batch(batch, engine.sampler.prepare(batch))
print(out)
print("前向之后的请求：", req)
assert out.next_tokens.dtype == torch.int32 and out.next_tokens.shape == (1,)
# CPU 上：副本就是同一个张量，也没有事件
assert out.next_tokens_cpu is out.next_tokens and out.copy_done is None
assert req.cached_len == 0 and len(req.input_ids) == 5  # Engine 不替调度器记账
engine.page_allocator.free_slots(engine.page_table, row, 5)  # 这一步只演示，收拾干净
table.free(row)

# %% [markdown]
# 前向之后请求的记账原封不动（`cached_len=0, device_len=5`）：`complete_one()` 要调度器来调。槽位 `[0, 1, 2, 3, 4]` 占了两页（每页 4 个），这一步之后手工还掉了。
#
# ### ForwardOutput：为什么带一份 CPU 副本和一个事件

# %% tags=["remove-input"]
listing("minisgl/engine/engine.py", "ForwardOutput")

# %% [markdown]
# 在 GPU 上，CUDA 内核是**异步**发射的：`forward_batch` 返回时，GPU 可能还在算这一步的前几层。调度器要把 token 拿回 CPU（判断有没有遇到 EOS、发给用户），最直接的写法 `next_tokens.tolist()` 会让 CPU 停下来等 GPU 把队列里的活全部干完——这段时间 CPU 什么也做不了，下一步的批次也准备不了。
#
# `forward_batch` 换了一种写法：发射一次 `non_blocking=True` 的拷贝（从 CUDA 拷到 CPU 时，PyTorch 把目标分配在锁页内存里，拷贝由 DMA 异步完成），紧跟着在同一个流上记录一个 `torch.cuda.Event`。函数立即返回，CPU 可以先去做别的事；等真的要读 token 时，调用 `copy_done.synchronize()`——只等到这次拷贝完成为止。本章的 `generate` 是同步的，拿到结果马上就等；第 11 章的重叠调度会在等待之前先把下一步的批次发射出去，让 CPU 的调度开销藏在 GPU 的计算后面。
#
# 反过来，**没等事件就读 CPU 副本**是一个安静的错误：读到的是拷贝完成之前那块内存里的旧值，程序不报错，只是生成出乱码（PyTorch 关于 `non_blocking` 与 `pin_memory()` 的官方教程专门举过 `cuda_tensor.to("cpu", non_blocking=True)` 之后立刻使用会得到垃圾的例子）。本章的测试 `test_generate_waits_for_the_copy_before_reading_tokens` 在 CPU 上模拟了一个“迟到”的拷贝，专门抓这个错。在 CPU 上没有异步可言，`next_tokens_cpu` 就是 `next_tokens` 本身，`copy_done` 为 `None`。
#
# ## 一个请求的一生：generate 逐步看
#
# 把 `forward_batch` 和 `free_slots` 包一层，打印每一步送进模型的是谁、哪些位置、写进哪些槽位，以及每次还了几页。三个提示分别有 5、3、2 个 token，最多生成 2、4、1 个，页大小 4：

# %%
log_forward, log_free = engine.forward_batch, engine.page_allocator.free_slots


def traced_forward(batch, args):
    spans = "，".join(f"#{r.uid} 算位置 " + (f"{r.cached_len}" if r.extend_len == 1
                                           else f"{r.cached_len}..{r.device_len - 1}")
                     for r in batch.reqs)
    out = log_forward(batch, args)
    print(f"{batch.phase}，批大小 {len(batch.reqs)}：{spans}")
    print(f"    out_loc = {batch.out_loc.tolist()}，已用 {engine.page_allocator.num_used_pages} 页")
    return out


def traced_free(page_table, row, length, **kw):
    before = engine.page_allocator.num_free_pages
    log_free(page_table, row, length, **kw)
    freed = engine.page_allocator.num_free_pages - before
    print(f"    第 {row} 行的请求结束：还回位置 [0, {length}) 所在的 {freed} 页")


engine.forward_batch, engine.page_allocator.free_slots = traced_forward, traced_free
prompts = [[11, 12, 13, 14, 15], [21, 22, 23], [31, 32]]
outputs, sizes = generate(engine, prompts, [SamplingParams(max_tokens=n) for n in (2, 4, 1)])
del engine.forward_batch, engine.page_allocator.free_slots  # 恢复类上的原方法
print("每个请求生成的 token：", outputs)
print("每一步的批大小：", sizes)
assert sizes == [3, 2, 1, 1] and [len(o) for o in outputs] == [2, 4, 1]
assert engine.page_allocator.num_free_pages == engine.num_pages  # 全部还回来了

# %% [markdown]
# 逐行读：
#
# - **prefill**：三个请求一起算，位置各自从 0 开始；请求 0 有 5 个 token，跨了两页（槽位 0–3 和 4），请求 1、2 各一页。`out_loc` 里槽位不连续（`8, 9, 10` 之后跳到 `12, 13`）：每个请求从新的一页开始。
# - **请求 2** 只要 1 个 token，prefill 一步就生成满了：它的 `cached_len = 2`，还回 `[0, 2)` 所在的 1 页。它最后那个 token 从没进过模型。
# - **decode 第 1 步**：批大小 2。请求 0 的位置 5 接在槽位 4 后面（同一页的下一格，不需要新页），请求 1 的位置 3 接在槽位 10 后面。之后请求 0 生成满，还回 `[0, 6)` 的 2 页。
# - **decode 第 2 步**：请求 1 走到位置 4，`4 % 4 == 0`，要一页新页——拿到的是刚刚还回来的第 0 页（槽位 0）：空闲页是一个栈，最近还回来的最先被用到（第 4 章）。
# - 最后请求 1 还回 `[0, 6)`，一共 2 页，所有页都回到了池里。
#
# 这里能看到为什么 `free_slots` 的长度必须是 `cached_len`：请求 1 结束时 `device_len = 7`，可位置 6（第 4 个新 token）只被采样出来、没被算过，页表那一格从没分配。这里 `6 % 4 ≠ 0`，多算一格碰巧不出事；可一旦那个位置正好是一页的开头，`free_slots` 就会把页表那一格的旧值（上一个用这一行的请求留下的）当成页号还回去——那一页可能正被别的请求用着，或者引发“重复释放”的报错。
#
# ## 采样器：贪心、温度、top-k、top-p
#
# ![采样器降序排一次：先把名次 ≥ k 的 logits 置为 −inf，再对剩下的重新 softmax，算出每个 token 前面的概率之和，≥ p 的置 0，最后按比例抽一个名次并换回 token id](../assets/ch06_sampler.svg)
#
# 一批里每个请求都有自己的 `SamplingParams`。逐个请求循环采样很慢（GPU 上每个请求几个小内核），所以采样器分两步：`prepare` 把参数整理成几列张量，`sample` 对整批一次算完。

# %% tags=["remove-input"]
listing("minisgl/engine/sample.py", "BatchSamplingArgs")

# %% tags=["remove-input"]
listing("minisgl/engine/sample.py", "Sampler.prepare")

# %% [markdown]
# 最常见的情况是整批都贪心（`temperature=0` 的评测、或者所有用户都没开采样），这时 `prepare` 什么张量都不建，`sample` 只做一次 `argmax`。否则每个请求一行：`greedy` 标出哪些行走 argmax；贪心行的温度填 1（它们的采样结果不会被用到，填 0 会除出 `inf`）；`top_k = -1`（不限制）换成词表大小，让“名次 ≥ k 就去掉”这条规则对它们自然失效。
#
# `is_greedy` 来自第 1 章：温度为 0 **或者** `top_k == 1`。`top_k = 1` 只留第一名，不管温度多高、`top_p` 多少，结果都是 argmax，走 argmax 分支既更快、也不消耗随机数。

# %% tags=["remove-input"]
listing("minisgl/engine/sample.py", "Sampler.sample")

# %% [markdown]
# 采样的每一步：
#
# 1. **温度**：`logits / T`。T < 1 拉大差距、分布更尖；T > 1 缩小差距、更平。做在排序之前，因为除以正数不改变名次，排一次就够。
# 2. **一次排序**：降序排，`order` 记下排第 r 名的是哪个 token。`stable=True` 让 logit 并列的 token 按 id 从小到大排，同样的输入永远同样的结果（判题练习 018 也用这个约定）。
# 3. **top-k**：名次 `r ≥ k` 的置为 `-inf`。排过序之后 top-k 只是一个按列号的掩码，每行的 k 不同也没关系。
# 4. **top-p**：对剩下的重新 softmax（top-k 之后的概率会变大），算每个 token **前面**的概率之和 `mass_before = cumsum − probs`，`≥ p` 的置 0。`top_p = 1` 被当成“不限制”：浮点累加到末尾可能恰好凑出 1.0，不能因此误删长尾。
# 5. **抽样**：`torch.multinomial` 按权重抽一个名次，权重不必归一化；`order.gather` 把名次换回 token id。
# 6. **贪心行**：`torch.where(greedy, argmax, sampled)`，用原始 logits 的 argmax 覆盖。
#
# 一次排序同时服务 top-k 和 top-p，是这个写法的要点：top-k 要“前 k 名”，top-p 要“按概率从大到小的前缀”，两者都需要降序，分开做就要排两次。代价也要心里有数：每行对整个词表排序是 O(V log V)，SmolLM2 的词表 4.9 万、Qwen3 的 15 万，在 GPU 上这是一个不小的内核，上游因此改用 FlashInfer 不排序的采样内核（见“与官方的差异”）。
#
# 用图里那行分布检查一下：8 个 token，概率按 id 是 `[0.10, 0.04, 0.20, 0.08, 0.02, 0.35, 0.06, 0.15]`，`top_k = 5, top_p = 0.75`。按图的推算，只有 token 5、2、7 能被抽到，概率分别是 0.5、0.286、0.214。把这一行复制 2 万份组成一批，让采样器一次抽完：

# %%
from minisgl.engine import BatchSamplingArgs, Sampler

probs_by_id = torch.tensor([0.10, 0.04, 0.20, 0.08, 0.02, 0.35, 0.06, 0.15])
logits = probs_by_id.log()  # softmax(log p) = p
N = 20000


def same_args(n, temperature=1.0, top_k=8, top_p=1.0):
    """n 行一样的采样参数（直接构造 BatchSamplingArgs，省掉 n 个请求）。"""
    return BatchSamplingArgs(all_greedy=False,
                             greedy=torch.zeros(n, dtype=torch.bool),
                             temperatures=torch.full((n,), temperature),
                             top_k=torch.full((n,), top_k, dtype=torch.int64),
                             top_p=torch.full((n,), top_p))


sampler = Sampler(torch.device("cpu"), vocab_size=8, seed=0)
drawn = sampler.sample(logits.expand(N, 8), same_args(N, top_k=5, top_p=0.75))
freq = torch.bincount(drawn.long(), minlength=8) / N
print("各 token 被抽中的频率：", {i: round(f, 3) for i, f in enumerate(freq.tolist())})
assert set(drawn.unique().tolist()) == {2, 5, 7}
assert abs(freq[5] - 0.5) < 0.02 and abs(freq[2] - 0.2857) < 0.02 and abs(freq[7] - 0.2143) < 0.02

# %% [markdown]
# ### “前面之和”与“到自己为止”
#
# top-p 的定义是“按概率从大到小，留下概率和 ≥ p 的**最短**前缀”。这个前缀的最后一个 token 正是“跨过 p 的那个”：它前面的和还 < p，加上它才 ≥ p。所以判断一个 token 留不留，要看**它前面**的和。常见的错误写法是看“累积到它自己为止”：

# %%
sorted_p, _ = probs_by_id.sort(descending=True)
cum = sorted_p.cumsum(0)
before = cum - sorted_p
print("降序的概率:", [round(x, 2) for x in sorted_p.tolist()])
for p in (0.75, 0.3):
    right, wrong = before < p, cum < p
    print(f"top_p={p}：")
    print(f"  正确（前面之和 < p）    留下 {int(right.sum())} 个，概率和 {sorted_p[right].sum():.2f}")
    print(f"  错误（到自己为止 < p）  留下 {int(wrong.sum())} 个，概率和 {sorted_p[wrong].sum():.2f}")
try:
    torch.multinomial(torch.zeros(1, 8), 1)  # 错误写法在 p=0.3 时得到全 0 的一行
except RuntimeError as e:
    print("全被删光时 multinomial：", e)
assert (before < 0.3).sum() == 1 and (cum < 0.3).sum() == 0

# %% [markdown]
# p = 0.75 时错误写法少留了一个（概率和 0.70，不到 p）；p = 0.3 时第一名自己就有 0.35，错误写法把它也删了，整行全 0，`multinomial` 直接报错。正确写法里第一名前面是空的，和为 0，而 `SamplingParams` 保证 `p > 0`，第一名永远留下——这就是“至少留一个”的全部理由，不需要额外的特判。
#
# ### 温度
#
# 同一行 logits，在三个温度下各抽 2 万次，与理论值 `softmax(logits / T)` 比较（按概率从大到小列前四名）：

# %%
top4 = probs_by_id.argsort(descending=True)[:4].tolist()
print(f"{'T':<5}" + "".join(f"{'token ' + str(t):>18}" for t in top4))
for T in (0.5, 1.0, 2.0):
    drawn = sampler.sample(logits.expand(N, 8), same_args(N, temperature=T))
    freq = torch.bincount(drawn.long(), minlength=8) / N
    theory = (logits / T).softmax(-1)
    print(f"{T:<5}" + "".join(f"{freq[t]:>10.3f} / {theory[t]:.3f}" for t in top4))
    assert (freq - theory).abs().max() < 0.02

# %% [markdown]
# T = 0.5 时第一名从 0.35 涨到 0.59，T = 2 时降到 0.23，分布被拉平。T → 0 的极限是 argmax，但不能真拿 0 去除，所以 `temperature = 0` 在第 1 章就被定义成贪心，走 argmax 分支。
#
# ### 贪心行、混合批次
#
# 一批里混着贪心和采样请求时，`prepare` 出来的是这样几列；抽 200 次，贪心的两行（包括 `temperature=0.8, top_k=1` 那行）每次都是 argmax，采样的那行各种 token 都有：

# %%
from minisgl.core import Batch


def make_batch(params):
    reqs = [Req(input_ids=torch.tensor([1, 2], dtype=torch.int32), table_idx=i, cached_len=0,
                output_len=4, uid=i, sampling_params=p, cache_handle=None)
            for i, p in enumerate(params)]
    return Batch(reqs, "decode")


args = sampler.prepare(make_batch([SamplingParams(), SamplingParams(temperature=0.8, top_k=1),
                                   SamplingParams(temperature=1.5, top_p=0.9)]))
print(args)
draws = torch.stack([sampler.sample(logits.expand(3, 8), args) for _ in range(200)])
print("每行抽到过的 token：", [sorted(set(draws[:, i].tolist())) for i in range(3)])
all_greedy = make_batch([SamplingParams(), SamplingParams(top_k=1, temperature=2.0)])
print("整批贪心时：", sampler.prepare(all_greedy))
assert args.greedy.tolist() == [True, True, False] and (draws[:, :2] == 5).all()
assert len(set(draws[:, 2].tolist())) > 3

# %% [markdown]
# ### 种子：为什么采样器自己拿着一个 Generator
#
# 采样器在构造时建了自己的 `torch.Generator(device).manual_seed(seed)`，`multinomial` 只从它取随机数：

# %% tags=["remove-input"]
listing("minisgl/engine/sample.py", "Sampler.__init__")

# %% [markdown]
# 为什么不直接用 `torch.manual_seed` 设全局种子？
#
# - **不受别人打扰**。全局随机数流谁都能取：一个库初始化时抽了几个数、一段测试代码调了 `torch.rand`，后面的采样就整体错位。采样器自己的流只在采样时前进，结果只取决于“种子 + 之前采样过的批”。
# - **多个 rank 必须抽出同一个 token**。张量并行时每个 rank 都拿到完整的 logits（输出层 all-gather，第 2 章），各自采样；每个 rank 用同一个种子、以同样的顺序采样，才能抽出同一个 token 写进自己的 token pool。只要有一个 rank 的随机数流错了一位，它下一步的输入就和别人不同，all-reduce 会把两个不同序列的中间结果加在一起——结果是静悄悄的乱码。
# - **设备**。GPU 上的 `multinomial` 要一个同设备的 Generator；由 Engine 按自己的设备建，调用方不用操心。

# %%
one = same_args(1)


def sample_12(seed, disturb=False):
    smp = Sampler(torch.device("cpu"), 8, seed=seed)
    out = []
    for _ in range(12):
        if disturb:  # 别处的代码动了全局随机数
            torch.manual_seed(123)
            torch.rand(1000)
        out.append(smp.sample(logits[None], one).item())
    return out


a, b, c = sample_12(0), sample_12(0, disturb=True), sample_12(1)
print("种子 0：              ", a)
print("种子 0，全局随机数被动过：", b)
print("种子 1：              ", c)
smp = Sampler(torch.device("cpu"), 8, seed=0)
with_neighbour = [smp.sample(logits.expand(2, 8), same_args(2))[1].item() for _ in range(12)]
print("种子 0，但同批前面多一个请求：", with_neighbour)
assert a == b and a != c and with_neighbour != a

# %% [markdown]
# 前两行相同：全局随机数怎么动都不影响。最后一行揭示了这种设计的边界：随机数流是**整批共享**的，同一个请求、同一个种子，只要同批里多了一个邻居，它抽到的数就变了。所以本章的“可复现”指的是“同样的种子、同样的请求序列、同样的拼批方式 → 同样的结果”；要做到“每个请求只由自己的种子决定”，得给每一行独立的随机数（见练习 1）。
#
# 最后，Engine 有始有终：`shutdown()` 清掉全局上下文和 TP 登记，TP>1 时销毁进程组，同一个进程里才能再建下一个 Engine。

# %% tags=["remove-input"]
listing("minisgl/engine/engine.py", "Engine.shutdown")

# %%
engine.shutdown()
try:
    get_global_ctx()
except RuntimeError as e:
    print("shutdown 之后：", e)

# %% [markdown]
# ## 运行
#
# 把本章的 main 跑一遍（输出就是在本章的树里真实跑出来的）：

# %%
run("python examples/ch06_engine.py")

# %% [markdown]
# 值得注意的地方：
#
# - **批大小** `[4, 4, 4, 3, 3, 3, 2, 2, 2, 2, 1, 1]`：第 1 步是 4 个请求一起 prefill；最多生成 3 个的请求在第 3 步之后离开，6 个的在第 6 步之后、10 个的在第 10 步之后，最后两步只剩 12 个的那个。批一步比一步小，空出来的位置正是第 7 章连续批处理要塞进新请求的地方。
# - **与 HF 一致**：两个模型、4 个提示全部逐 token 相同。tiny Qwen3 的权重是随机的，输出是一串无意义的词，但“无意义”也要一模一样——这比真模型更严格：随机权重的 logits 彼此接近，哪一步算错一点，argmax 就会换人。SmolLM2 的输出能看出意思（`' Paris.'`），顺便说明 prefill 里 4 个请求拼在一起、各自只看见自己。
# - **空闲页 64 / 64**：所有请求都还回了全部页，没有泄漏。
# - **采样**：同一个种子跑两次结果相同，换种子结果不同；同一批里的贪心请求始终与 HF 一致——贪心行不受采样行的影响，走的是 argmax。
#
# ### 与 HF generate 比 decode 速度
#
# 基准测试（`examples/ch06_benchmark.py`）不是测试，不在 CI 里跑，下面的输出是写这一页时在一台 2 核的 x86 机器上真实跑出来的（表头第一行写着 PyTorch 用的线程数）。数字取决于机器：换一台机器、换线程数、机器上同时有别的负载，tokens/s 都会变，只有同一次运行里的“比值”有参考意义。两边用同样的 24 个 token 的提示、都贪心生成 32 个 token，计时口径相同——从 prefill 那一步结束到最后一步结束，正好 31 步 decode：

# %% tags=["remove-input"]
listing("examples/ch06_benchmark.py", "engine_decode_seconds")

# %% [markdown]
# !!! warning "数字取决于机器"
#     下面这张表是写这一页时跑出来的真实输出，CI 不会重跑它（它是基准测试，不是测试）。在你的机器上自己跑一遍：
#
#     ```bash
#     python tools/steps.py run 6 -- python examples/ch06_benchmark.py
#     ```

# %% tags=["remove-input"]
# NBVAL_SKIP
import contextlib
import io

buffer = io.StringIO()
with contextlib.redirect_stdout(buffer):
    run("python examples/ch06_benchmark.py")
first_line, _, table = buffer.getvalue().partition("\n")
Markdown(f"{first_line}\n\n{table}")

# %% [markdown]
# 这次运行用了 **2 个线程**（这台机器一共 2 个核，PyTorch 默认每个核一个线程），开跑前确认过机器空闲（1 分钟负载低于 0.5）。怎么读这两行：
#
# - **批大小 1：两边都约 27 tok/s，我们快 3%**（机器空闲时跑过几次，都在 1.03×–1.05×）。decode 一个 token 要把全部权重从内存里读一遍：SmolLM2 在 float32 下约 540 MB（其中嵌入和输出层共用的那张 49152 × 576 的表就有 113 MB），每步三十几毫秒几乎全花在矩阵-向量乘上，而两边调用的是同一个 BLAS（都是 torch 的 `linear`）。剩下那一点差距来自框架开销：HF 的 `generate` 每步要在 `[批, 49152]` 的 logits 上跑 logits processor（`min_new_tokens` 对 EOS 的屏蔽就是一次 `where` 加拷贝）、更新 `attention_mask` 和 `cache_position`；我们全贪心的批次只做一次 `argmax`。
# - **批大小 16：两边都在 220–240 tok/s，是批大小 1 的 8 倍多，我们慢 6%。** 空闲时跑过的几次里这个比值在 0.94×–1.01× 之间浮动，可以说基本打平；机器上有别的负载时会掉到 0.8× 左右。16 个 token 共用一次权重读取，矩阵-向量乘变成了矩阵乘，每个 token 分摊的内存流量降到 1/16，吞吐随之上去——这就是要把请求拼成批的全部理由。用 `torch.profiler` 在空闲时看一次 16 步，两边都有 83%–85% 的 CPU 时间在 `aten::mm` 里，所以比值不可能离 1 太远；剩下的 15% 里两边各有各的额外开销，大体相当。我们这边：每层通过页表把整段 K/V 收集出来（`index_select`，K、V 各一次）、`repeat_interleave` 成 9 个 q 头、`store_kv` 按索引写入；合并的 `gate_up`（一次 576 → 3072）在这台 CPU 的 BLAS 上并不比两次 576 → 1536 快；RoPE 每层按 positions 取一次 cos/sin，HF 每步只算一次传给所有层。HF 那边：KV 缓存是连续张量，每步每层 `torch.cat` 追加一格，要把整段缓存拷一遍；`generate` 在 `[16, 49152]` 的 logits 上做的拷贝和 logits processor 里的 `where`，profiler 里每步合计几毫秒。迷你调度器里逐个请求的 Python 循环（`alloc_slots`、回写 token pool）每步不到 1 毫秒，不到总时间的 1%。负载一重我们吃亏更多，是因为我们每步的小算子（索引、拷贝）比 HF 多：2 个线程里只要有一个被别的进程抢走，每个小算子都要等它。
# - **SDPA 后端的逐请求循环不在这张表里。** 第 5 章的后端只在 prefill 时逐个请求调用 SDPA（每层 16 次，HF 是每层 1 次），decode 时整批一次；而这里只计 decode 的时间。提示长短不一时，decode 的补齐和 key 掩码会多算一些被遮掉的位置，这张表为了让 HF 不必左填充，故意用了等长的提示。
#
# 所以在 CPU、float32、这么小的模型上，Engine 的价值不在单步更快：真正的收益在别处——请求可以陆续结束、空出的位置能塞进新请求（第 7 章），前缀能共享（第 9 章），长提示能分块（第 10 章），而 HF 的 `generate` 一批里要么等长、要么左填充，所有序列陪最长的那条跑到底。到了 GPU 上，情况又不一样：小批量时每步几百个小内核的发射开销和 CPU 侧的调度时间会占主导，那是第 11 章重叠调度、第 17 章按页读 K/V 的注意力内核、第 18 章 CUDA 图要解决的问题。
#
# ## 与官方的差异
#
# 名字、接口与上游 mini-sglang 一致（`EngineConfig`、`Engine.forward_batch`、`ForwardOutput`、`Sampler.prepare` / `sample`、`BatchSamplingArgs`），差别在这些地方：
#
# - **设备**。上游只跑 GPU：构造时断言 CUDA 还没初始化，设备固定是 `cuda:rank`，建一条自己的 CUDA 流，并用 `torch.manual_seed(42)` 设全局种子。我们 CPU、GPU 都能跑，不单建流。
# - **内存预算的口径**。上游在装权重**之前**量一次空闲显存（TP 时经 CPU 进程组 all-reduce 取各 rank 的最小值，相差超过 2 GiB 就报错），KV 预算 = `memory_ratio × 装权重前的空闲 − 权重占用`，默认 `memory_ratio = 0.9`，即“整个进程最多用掉空闲显存的 90%”。我们用装完权重**之后**的剩余乘以比例，默认 0.3——CPU 上的“剩余内存”是整机共享的。上游也不按页表封顶，而是反过来把 `max_seq_len` 限制到不超过池子的总 token 数，并把页表宽度向上对齐到 32 的倍数（每行 128 字节）。
# - **占位页**。上游的 KV 池多分配 1 页作为占位页，页表最后一行（占位请求）全部指向它，图重放时占位请求的 K/V 写进那里；我们现在只留了页表的一行，占位页到第 18 章再说。
# - **`complete_one` 由谁调**。上游的 `Engine.forward_batch` 在前向之后就对批里每个请求调用 `complete_one()`；我们把它留给调度器，Engine 完全不碰请求的记账（练习 3 讨论两种做法）。
# - **ForwardOutput**。上游是 `NamedTuple(next_tokens_gpu, next_tokens_cpu, copy_done_event)`，事件记录在 Engine 自己的流上，总是 GPU；我们是 dataclass，CPU 上副本就是原张量、事件为 `None`。
# - **采样器**。上游调用 FlashInfer 的采样内核（带温度的 softmax、`top_k_top_p_sampling_from_probs` 等，不对整个词表排序），只在有请求用到时才建 top-k / top-p 张量；温度和 top_p 都被夹到不小于 `1e-6`，混合批里的贪心行用一个极低的温度**近似** argmax；没有自己的 Generator，用全局种子；另外支持约束解码的词表掩码（grammar）。我们用纯 torch 一次排序，贪心行用 `torch.where` 换成**精确**的 argmax，随机数来自采样器自己的 Generator。
# - **上游还有、我们以后再加的**：CUDA 图（`GraphRunner`，第 18 章）、MoE 后端（第 20 章）、PyNCCL 通信（第 16 章）、`use_dummy_weight`（随机权重做性能测试）、按 GPU 架构自动选注意力后端。
#
# ### 官方实现
#
# 上游仓库 `sgl-project/mini-sglang`：
#
# - 装配：`python/minisgl/engine/engine.py` · `Engine.__init__`、`Engine._determine_num_pages`（页数）、`Engine._sync_get_memory`（各 rank 的空闲显存取最小值）、`Engine._load_weight_state_dict`
# - 前向：`python/minisgl/engine/engine.py` · `Engine.forward_batch`、`ForwardOutput`
# - 配置：`python/minisgl/engine/config.py` · `EngineConfig`（`max_seq_len`、`max_forward_len`、`distributed_addr`）
# - 采样：`python/minisgl/engine/sample.py` · `Sampler.prepare`、`Sampler.sample`、`sample_impl`
# - 调度器一侧：`python/minisgl/scheduler/scheduler.py` · `Scheduler._prepare_batch`（补齐、分配槽位、positions、`out_loc`、注意力元数据、采样参数）、`Scheduler._forward`（从 token pool 取 `input_ids`，把新 token 写回）、`Scheduler._process_last_data`（`copy_done.synchronize()` 之后才读 CPU 副本）

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch06_engine.py`，分两组。采样器一组不加载模型，用随机 logits 检查每一条规则；其中 top-p 的测试自己写了一个“逐个加入，直到累计概率达到 p”的参照，检查采样结果从不落在这个最短前缀之外、并且第一名一定会被抽到：

# %% tags=["remove-input"]
listing("tests/test_ch06_engine.py", "test_top_p_keeps_the_smallest_nucleus")

# %% [markdown]
# Engine 一组在 SmolLM2 和 tiny Qwen3 上、页大小 1 和 4 下，把 4 个提示拼成一批生成，逐 token 对照 HF，并检查批大小的变化和页全部还回：

# %% tags=["remove-input"]
listing("tests/test_ch06_engine.py", "test_batched_greedy_equals_huggingface")

# %% [markdown]
# 还有一个测试专门抓“没等拷贝完成就读 CPU 副本”：它把 `forward_batch` 包一层，交回的 CPU 副本先填满 `-1`，只有调用 `copy_done.synchronize()` 时才把真 token 拷进去——忘了等，生成的就是垃圾：

# %% tags=["remove-input"]
listing("tests/test_ch06_engine.py", "test_generate_waits_for_the_copy_before_reading_tokens")

# %% [markdown]
# 其余测试覆盖：全贪心批次不建任何张量；混合批里贪心行（含 `top_k=1`）始终是 argmax；top-k 只从前 k 名里抽、并且 k 个都会出现；温度下的频率通过卡方检验；同种子同结果、换种子不同；内存预算分支的页数不超过页表上限；页不够时抛 `OutOfPagesError` 而且什么都不改；`shutdown` 清掉全局上下文；`EngineConfig` 拒绝坏值。在本章的树里跑全部：

# %%
run("python -m pytest -q --color=no tests/test_ch06_engine.py")

# %% [markdown]
# ## 怎么讲清楚
#
# Engine 是推理引擎里“只管算”的那一层：构造时按依赖顺序装配一次——先登记 TP 和设备，再在 meta 设备上建模型（只有形状、不占内存），流式加载本 rank 切好的权重整个替换上去；权重落地后用剩余内存乘 `memory_ratio` 除以每页字节数定 KV 池的页数，并且不超过页表能用到的上限；然后建 `[max_running_req + 1, max_seq_len]` 的页表（多一行给图捕获的占位请求）、页分配器、注意力后端和带固定种子的采样器。运行时它只有一个 `forward_batch`：在全局上下文里挂上批次、前向、去掉占位行、采样，返回设备上的 token、一份异步拷回 CPU 的副本和一个 CUDA 事件，让调度器可以先准备下一步再等结果。选请求、分配槽位、从 token pool 拼 `input_ids`、positions、注意力元数据、更新请求记账、结束时按 `cached_len` 还页，全是调度器的事。采样器把一批的参数整理成列，降序排一次，在排好的序列上做 top-k（名次 ≥ k 置 −inf）和 top-p（前面的概率之和 ≥ p 置 0，所以第一名永远留下），`multinomial` 抽名次再换回 token id，贪心行（温度 0 或 top_k 1）直接用 argmax；随机数来自采样器自己的 Generator，保证同种子可复现、多个 TP rank 抽出同一个 token。

# %% [markdown]
# ## 练习
#
# 1. **按请求的种子**。本章的随机数流整批共享，同一个请求换个邻居结果就变。设计一种做法，使“同一个请求、同一个种子、同一个位置”不管和谁拼批都抽出同一个 token，并且仍然对整批向量化（不许逐行调用 `multinomial`）。
# 2. **页数上限遇上前缀缓存**。本章把页数封顶在 `max_running_req × ⌈max_seq_len ÷ page_size⌉`，理由是“页表写满也用不到更多”。第 9 章的 radix cache 会让已结束请求的页留在池里，供后来的请求复用前缀。那时这个上限还成立吗？上游为什么不封顶页数，而是反过来限制 `max_seq_len`？
# 3. **`complete_one` 放在哪**。上游的 `Engine.forward_batch` 在前向之后立即对每个请求 `complete_one()`，我们留给调度器在拿到结果之后做。在第 11 章的重叠调度下（先发射第 k+1 步，再处理第 k 步的结果），两种放法各会怎样？
#
# ??? success "参考答案"
#
#     1. 不用有状态的 Generator，而用“计数器式”的随机数：每一行的均匀随机数 `u` 由 `(请求的种子, 这个 token 的位置)` 算出来，例如把两者喂进一个整数哈希（或 Philox 这类计数器随机数发生器）再映射到 `[0, 1)`。有了每行的 `u`，采样就是一次“逆 CDF”：在 top-k/top-p 处理过、降序排好的概率上做 `cumsum`，找第一个 `cumsum ≥ u × 总和` 的名次（`torch.searchsorted` 对整批一次完成），再用 `order` 换回 token id。每行只依赖自己的种子和位置，和邻居无关；重跑同一个请求，位置相同、种子相同，结果相同。代价是要自己保证哈希的质量。
#     2. 不再严格成立。页表只记录**正在运行**的请求，而前缀缓存持有的页不在任何一行里：池子比页表上限大，多出的页可以用来存已结束请求的前缀，命中率更高。所以有了前缀缓存，“页表能用到的页数”不再是池子有用的上限，按内存预算定页数更合理。上游就是这样：页数只由显存预算决定，再把 `max_seq_len` 限制到不超过池子的总 token 数——一个请求再长也不可能超过整个池子，页表宽度也不必大于它。
#     3. 上游的放法：发射第 k+1 步时 `complete_one()` 已经做完，调度器马上就能根据新的 `cached_len / device_len` 准备第 k+2 步的批次（positions、槽位），不必等第 k+1 步的 token 拷回来——token 本身在设备上的 token pool 里，下一步直接取。重叠调度要的正是“记账不依赖结果”。我们的放法在同步循环里没问题（拿到结果、马上记账、再准备下一步），但在重叠调度下，准备第 k+2 步时第 k+1 步的结果还没处理，记账会落后一步，positions 和槽位就算错了；要么把 `complete_one()` 挪到发射之后，要么像上游那样放进 `forward_batch`。代价是 Engine 开始修改调度器的对象，两层的边界没那么干净了。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 18   # 把第 18 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 18    # 判题
# python practice/judge.py hint 18    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - Engine 的构造顺序由依赖决定：TP 信息 → 设备 → Context → meta 上的模型 → 流式权重 → KV 池（剩余内存 × `memory_ratio` ÷ 每页字节，且不超过页表上限，或直接 `num_page_override`）→ 页表 `[max_running_req + 1, max_seq_len]` → `PageAllocator` → 注意力后端 → 采样器。
# - meta 设备让模型“建好”不占内存，权重只落地一份；KV 池必须在权重之后定大小。
# - `forward_batch` 只做前向和采样；选请求、分配槽位、准备 `input_ids` / positions / `out_loc` / 注意力元数据、记账和释放都归调度器。
# - `ForwardOutput` 带异步的 CPU 副本和 CUDA 事件：读副本之前先等事件，这是第 11 章重叠调度的基础。
# - 采样器排一次序同时做 top-k 和 top-p；“前面之和 ≥ p 才丢”保证第一名永远留下；贪心行（温度 0 或 top_k 1）用精确的 argmax。
# - 采样器自己的 Generator 让结果只由种子和采样历史决定，多个 TP rank 因此抽出同一个 token；但随机数流整批共享，同一个请求换了邻居结果会变。
# - 请求结束时按 `cached_len` 还页：最后采样出的 token 从没进过 KV 池。
