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
# # 第 4 章 KV 池、页表与 token pool
#
# 第 0 章的最小引擎给一条序列配一块 KV 缓存：每层一段连续内存，按“提示长度 + 最多生成多少”一次分配好。一条序列这样做没问题；一个服务同时跑几十上百条序列，这种做法就处处碰壁：每条都得按最坏情况预留，大半空间直到请求结束都没人用；请求长短不一、随时结束，连续的大块分来分去，很快就被切成一地碎片，明明总量够，却找不出一段够长的连续空间。推理引擎的解法和操作系统管内存一样：启动时一次性分配**一整块 KV 池**，切成固定大小的**槽位**（一个槽位放一个 token 的 K/V），再用一张**页表**记下“第几个请求的第几个 token 放在哪个槽位”。请求长一个 token，就多拿一个槽位；请求结束，槽位还回池子给别人用。本章写这三样东西：KV 池 `MHAKVCachePool`、按页发放槽位的 `PageAllocator`，以及管理页表行号、并在旁边存一份 token id 的 `TableManager`（token pool）。它们不做任何计算，只管“K/V 存在哪儿”——但从下一章的注意力后端到第 9 章的前缀缓存，每一次读写 K/V 都要先经过这张页表。

# %% tags=["remove-cell"]
from minibook.page import *
_ = setup(4)  # 赋值而不显示：返回的树路径随机器而变

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. Qwen3-0.6B（28 层、8 个 KV 头、head_dim 128）用 bfloat16，一个 token 的 K/V 占多少字节？TP=2 时每个 rank 呢？1 GiB 的 KV 池在单卡上能放多少个 token？
# 2. `page_size = 4`。一个请求拿到的是第 7 页和第 2 页，已经有 6 个 token（页表这一行是 `[28, 29, 30, 31, 8, 9]`）。接下来 decode 三步，位置 6、7、8 的槽位各是多少？哪一步要向分配器要新页？
# 3. 页表为什么存的是每个 token 的**槽位**，而不是每一页的**页号**？
# 4. 池子只剩 2 页，`alloc_slots` 却要 3 页。它为什么必须“什么都不改”就报错，而不是先把能分的 2 页分了？
# 5. token id 已经在 CPU 上的 `Req.input_ids` 里了，为什么还要在设备上、页表旁边再存一份 token pool？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 每层存 K 和 V 各 8 × 128 个数：2 × 28 × 8 × 128 × 2 字节 = 114,688 字节 = 112 KiB。TP=2 时每个 rank 只存 4 个 KV 头，56 KiB。1 GiB 能放 2^30 / 114,688 ≈ 9,362 个 token——不到十个 1k 长度的请求。
#     2. 位置 6、7 和前面的 4、5 同在第 2 页（`pos // 4 == 1`），槽位接着往后数：10、11，不要新页。位置 8 是页首（`8 % 4 == 0`），要一页新页 p，槽位是 `4p`。
#     3. 注意力后端要的是“这个请求第 j 个 token 的 K/V 在哪”，按 token 存就是一次查表 `page_table[row, j]`，和页大小无关；`page_size = 1` 和 `16` 用的是同一套读写代码。按页存的话，每次都要算 `页号 × page_size + j % page_size`。代价是页表大了 `page_size` 倍——每个请求一行 int32，相比 K/V 本身（一个 token 上百 KiB）微不足道。
#     4. 页不够时调度器会换个做法再试：这一轮先不收这个请求，或者从前缀缓存里腾出几页（第 9 章）。如果失败的调用已经拿走了 2 页，这 2 页不属于任何一个记过账的请求长度，再也不会被还回来；页表那一行也写了一半，重试时会接着错误的槽位往后数。“检查够不够”必须在“动手拿”之前。
#     5. 调度器每一步要拼出这一批的 `input_ids`。decode 时上一步采样出的 token 还在设备上；如果 token 只存在 CPU 上，就得等它拷回来、再拼好送回设备，一步多一次往返，还让 CPU 和 GPU 不能重叠（第 11 章）。token pool 和页表同形状，`input_ids = token_pool[行, 位置]`、`out_loc = page_table[行, 位置]` 用同一对下标在设备上一次取出，新 token 也在设备上直接写回。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章新建 `minisgl/kvcache/`（接口 `base.py`、池子 `mha_pool.py`、分配器 `allocator.py`）和 `minisgl/scheduler/` 里的第一个文件 `table.py`。调度器本身要到第 7 章才来，页表的行管理和 token pool 先放进来，是因为它们和 KV 池是同一套记账的两半。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch04_kvcache.py`。它不跑模型，只走一遍“K/V 存在哪儿”的记账，分四节：按 SmolLM2 和 Qwen3-0.6B 的真实配置算 KV 池的形状和字节数；三个长度不同的请求领到页表的行和页（`page_size = 4`，池子只有 8 页），把随机的 K 写进池子、再按页表取回核对；decode 一步，每个请求多一个 token；一个请求结束，它的行和页交给新请求，最后故意要一次超出池子的分配。它只用到上面这棵树里的文件；`python tools/steps.py check` 会逐章搭出这棵树、跑这个 main 和树里的全部检查。只跑这一个 main：
#
# ```bash
# python tools/steps.py run 4 -- python examples/ch04_kvcache.py
# ```
#
# main 里每一步对每个请求做的事，就是以后调度器和注意力后端每一步要做的事——分槽位、写 token pool、把 K/V 写进槽位：

# %% tags=["remove-input"]
listing("examples/ch04_kvcache.py", "main.step")

# %% [markdown]
# ## 一张图：三个请求共用一个池子
#
# ![page_size = 4 时三个请求共用一个 8 页的 KV 池：上面是页表（行 = 请求，列 = 位置，格子里是槽位号），中间是池子的 32 个槽位按页排开，下面是和页表同形状的 token pool；decode 一步用同一对 (行, 位置) 下标取出 out_loc 和 input_ids](../assets/ch04_paged_pool.svg)
#
# 这是 main 第三节结束时的状态，三张表从上往下读：
#
# - **① 页表**。每个正在运行的请求占一行（行号就是第 1 章 `Req` 里的 `table_idx`），第 j 列是这个请求第 j 个 token 的 K/V 所在的**槽位**。粗竖线每 4 列一条：同一段里的 4 个位置属于这个请求的同一页，槽位连续；跨过竖线就换一页，新页是哪一页要看分配器手里还剩什么——uid 1 先拿到页 2、3，decode 到位置 8 时页 4 已经给了 uid 2，于是拿到页 5。
# - **② KV 池**。池子本身只是一排槽位，不知道哪个槽位属于谁。页 1 的后两格、页 5 的后三格已经分出去了，却还没有 token 住进来：这是按页分配的代价，叫**内部碎片**。页 6、7 空闲。
# - **③ token pool**。和页表一样的形状，同一格存的是那个位置的 token id。decode 一步时，调度器用同一对下标 `(rows, positions)` 从页表取出 `out_loc`（K/V 写到哪），从 token pool 取出 `input_ids`（送进模型什么），两次都是设备上的一次索引。
#
# 下面从池子讲起，再讲页表和分配器，最后是 token pool。

# %% [markdown]
# ## 为什么要一个池子
#
# 先把第 0 章的做法放大到一个服务上看。第 0 章的 `KVCache` 每条序列一块，按 `提示长度 + max_tokens` 预先分配。服务里的请求事先不知道会生成多少——遇到 EOS 就停，`max_tokens` 只是上限——可连续的一块缓冲区没法原地变长（后面紧挨着的可能已经是别人的），只能按上限预留。拿 32 个请求做个快照：提示 50–800 个 token，`max_tokens = 1024`，真实的输出长度在 10–1024 之间，此刻每个请求都生成到了一半：

# %%
import random

import torch

rng = random.Random(0)
MAX_TOKENS = 1024
# 每个请求：(提示长度, 真实的输出长度)
reqs = [(rng.randint(50, 800), rng.randint(10, MAX_TOKENS)) for _ in range(32)]
reserved = sum(prompt + MAX_TOKENS for prompt, _ in reqs)  # 第 0 章的做法：按上限预留
in_use = sum(prompt + out // 2 for prompt, out in reqs)  # 此刻真正存着 K/V 的
print(f"按上限预留 {reserved:,} 个 token 的位置，此刻真正用到 {in_use:,} 个，"
      f"利用率 {in_use / reserved:.0%}")
assert in_use / reserved < 0.6

# %% [markdown]
# 将近一半的显存被“以后也许会用到”的空位占着，而 KV 缓存的大小直接决定能同时服务几个请求。就算预先知道每个请求的确切长度、一点不多留，连续分配还有第二个问题：**外部碎片**。下面用同一串随机的到达和离开（请求长度 64–1536）分别驱动两种分配：一种在 8192 个槽位里找一段够长的连续空间（first-fit，离开时合并相邻的空洞），一种用本章的 `PageAllocator` 按 16 个槽位一页发放：

# %%
from minisgl.kvcache import PageAllocator


def first_fit(holes, n):  # holes：按起点排好的空洞 [(起点, 长度)]
    for i, (start, size) in enumerate(holes):
        if size >= n:
            holes[i] = (start + n, size - n)
            if size == n:
                holes.pop(i)
            return start
    return None


def release(holes, start, n):  # 还回一段，和相邻的空洞合并
    merged = []
    for s, size in sorted(holes + [(start, n)]):
        if merged and merged[-1][0] + merged[-1][1] == s:
            merged[-1] = (merged[-1][0], merged[-1][1] + size)
        else:
            merged.append((s, size))
    holes[:] = merged


def simulate(kind, capacity=8192, page_size=16, steps=4000, seed=1):
    rng = random.Random(seed)
    holes = [(0, capacity)]
    alloc = PageAllocator(capacity // page_size, page_size, "cpu")
    live, rejected, enough_but_rejected, usage = [], 0, [], []
    for _ in range(steps):
        if rng.random() < 0.5:  # 来了一个请求
            n = rng.randint(64, 1536)
            if kind == "连续":
                start = first_fit(holes, n)
                ok, free = start is not None, sum(size for _, size in holes)
                if ok:
                    live.append((start, n))
            else:
                need = alloc.pages_needed(0, n)
                ok = need <= alloc.num_free_pages
                free = alloc.num_free_pages * page_size
                if ok:
                    live.append((alloc.alloc_pages(need), n))
            if not ok:
                rejected += 1
                if free >= n:  # 空闲总量够，却放不下
                    enough_but_rejected.append(free / capacity)
        elif live:  # 随机一个请求结束
            held, n = live.pop(rng.randrange(len(live)))
            release(holes, held, n) if kind == "连续" else alloc.free_pages(held)
        usage.append(sum(n for _, n in live) / capacity)
    return rejected, enough_but_rejected, sum(usage) / len(usage)


for kind in ("连续", "分页"):
    rejected, frag, usage = simulate(kind)
    if frag:
        why = f"其中 {len(frag)} 次空闲总量其实够（平均还空着 {sum(frag) / len(frag):.0%}）"
    else:
        why = "每次都是真的满了"
    print(f"{kind}：拒绝 {rejected} 次，{why}；平均利用率 {usage:.0%}")
frag_rejections = simulate("连续")[1]
assert len(frag_rejections) > 100 and simulate("分页")[1] == []

# %% [markdown]
# 连续分配的拒绝里，大部分发生在空闲总量其实够的时候：空闲的槽位散成了一个个小空洞，哪个都不够长。分页分配没有这个问题，因为一个请求的页**不必相邻**：只要空闲页数够，放在哪都行。它只在真的满了的时候拒绝，利用率也更高。
#
# 这就是 KV 池加页表的全部动机：**空间一次分好、按小块发放、不要求连续**。请求要多少拿多少（不再按上限预留），离开时整页还回（不留下空洞），一个请求的 K/V 散落在池子各处，由页表记住它们在哪。代价是读 K/V 时多一次间接寻址——注意力后端要先查页表，再去池子里取（第 5 章）。vLLM 把这个做法叫 PagedAttention，SGLang 和 mini-sglang 都沿用了它。

# %% [markdown]
# ## 一整块缓冲区：`[2, layers, slots, local_kv_heads, head_dim]`
#
# 池子的接口很小：注意力后端只通过 `k_cache(layer)`、`v_cache(layer)` 读，通过 `store_kv` 写。

# %% tags=["remove-input"]
listing("minisgl/kvcache/base.py", "BaseKVCachePool")

# %% [markdown]
# 把接口单独写成抽象类，是因为池子和注意力后端会各自变化：第 17 章更快的后端读的还是同一个池子；DeepSeek 那样的 MLA 模型存的是压缩过的 KV，换一种池子就行，后端接口不动。唯一的实现 `MHAKVCachePool` 是一块五维缓冲区：

# %% tags=["remove-input"]
listing("minisgl/kvcache/mha_pool.py", "MHAKVCachePool.__init__")

# %% [markdown]
# 五个维度从外到内：
#
# | 维度 | 大小 | 为什么放在这一层 |
# | --- | --- | --- |
# | 0 | 2 | 0 是 K，1 是 V。`kv_buffer[0]` 就是全部层的 K |
# | 1 | `num_layers` | 每层一段连续内存：`k_cache(i)` 是 `kv_buffer[0, i]`，一个连续的 `[slots, heads, head_dim]` 视图，内核拿一个指针就能读 |
# | 2 | `num_pages × page_size` | 槽位。页在形状里没有自己的一维，它只是“连续 `page_size` 个槽位”的记账单位 |
# | 3 | `local_kv_heads` | 这个 rank 存的 KV 头，见下文 |
# | 4 | `head_dim` | 一个头的 K（或 V） |
#
# 槽位在头的外面，所以一个 token 在一层的全部 K（`local_kv_heads × head_dim` 个数）挨在一起，和注意力层算出来的 `k`（`[T, heads, head_dim]`）一行对一行：`store_kv` 按 `out_loc` 写、注意力后端按页表取，都是以“一个 token 的一整行”为单位。同一页的 `page_size` 个槽位也挨在一起：按页读 K/V 的内核（第 17 章）读一页就是读一段连续内存。
#
# 为什么是一整块而不是每层一个张量？一是启动时**一次**分配，大小一目了然：第 6 章的 Engine 先加载权重，再拿剩下显存的一部分算出页数，一次建好池子，之后运行中不再向显存分配器要内存；二是 `k_cache(i)`、`v_cache(i)` 只是切片视图，写进视图就是写进池子，没有拷贝。用一个小池子看一下视图和偏移：

# %%
from minisgl.kvcache import MHAKVCachePool

pool = MHAKVCachePool(num_kv_heads=2, num_layers=3, head_dim=4, num_pages=5,
                      page_size=2, dtype=torch.float32, device="cpu")
print(pool)
print(f"kv_buffer {tuple(pool.kv_buffer.shape)}，"
      f"k_cache(1) {tuple(pool.k_cache(1).shape)}")
# 一层的 K 占多少字节（float32 每个数 4 字节）
layer_bytes = pool.num_slots * pool.local_kv_heads * pool.head_dim * 4
base = pool.kv_buffer.data_ptr()
for name, view in [("k_cache(0)", pool.k_cache(0)), ("k_cache(1)", pool.k_cache(1)),
                   ("v_cache(0)", pool.v_cache(0))]:
    nth = (view.data_ptr() - base) // layer_bytes
    print(f"{name} 从第 {nth} 个“一层”开始，连续：{view.is_contiguous()}")
# 全部层的 K 之后才是 V
assert pool.v_cache(0).data_ptr() - base == pool.num_layers * layer_bytes

out_loc = torch.tensor([7, 2, 3], dtype=torch.int32)  # 槽位不必连续、不必有序
k = torch.randn(3, 2, 4)
pool.store_kv(k, -k, out_loc, layer_id=1)
assert torch.equal(pool.kv_buffer[0, 1, 7], k[0])
assert torch.equal(pool.v_cache(1)[out_loc], -k)

# %% [markdown]
# `store_kv` 的核心只有两行 `self._k_buffer[layer_id][out_loc] = k`：用整数张量做下标的赋值是原地写，第 i 个 token 写进第 `out_loc[i]` 个槽位。前面那些检查只看形状和 dtype——CPU 上就知道的东西，不读张量的内容：在 GPU 上，读一次内容（比如检查槽位有没有越界）就是一次设备同步，每层每步都做，就把流水线卡死了。

# %% tags=["remove-input"]
listing("minisgl/kvcache/mha_pool.py", "MHAKVCachePool.store_kv")

# %% [markdown]
# 池子用 `torch.empty` 分配，不清零：清零一块几十 GiB 的显存要花时间，而正确的代码只会读写过的槽位——页表保证一个请求只读它自己写过的那些。测试里会反过来，把池子填满 `nan`，读到没写过的槽位就露馅。
#
# ### 为什么按“本地 KV 头”存
#
# 张量并行（第 16 章）按注意力头切：每个 rank 算自己那几个 query 头的注意力，它们只用到对应的那几个 KV 头。所以每个 rank 的 KV 池只存本地的 KV 头，`local_kv_heads = div_even(num_kv_heads, tp, allow_replicate=True)`——和第 2 章 `LinearQKVMerged` 切 k/v 投影的规则一模一样，算出来的 k 正好放得进池子。KV 头比 rank 少时（Qwen3-0.6B 8 个 KV 头、TP=16），每个 rank 存 1 个头，两个 rank 存的是同一个头的副本：多花一倍 KV 显存，换来注意力仍然不需要任何通信。
#
# ### 一个 token 要多少字节
#
# 每个 token 每层存 K 和 V 各 `local_kv_heads × head_dim` 个数：
#
# `每个 token 的字节数 = 2 × num_layers × local_kv_heads × head_dim × 每个元素的字节数`
#
# 用两个真实配置算一遍。下面在 meta 设备上建池子（只有形状，不占内存），检查 `nbytes` 和公式一致；SmolLM2 只有 3 个 KV 头，TP=2 既切不开也复制不了：

# %%
from minibook.models import qwen3_06b_config, smollm2
from minisgl.distributed import set_tp_info
from minisgl.kvcache import create_kvcache_pool
from minisgl.models import ModelConfig
from IPython.display import Markdown


def human(n):
    return f"{n / 1024:,.1f} KiB" if n < 1024**2 else f"{n / 1024**2:,.0f} MiB"


configs = {"SmolLM2": ModelConfig.from_json(smollm2()),
           "Qwen3-0.6B": ModelConfig.from_json(qwen3_06b_config())}
lines = ["| 模型 | dtype | TP | 本地 KV 头 | 每个 token | 4096 个 token | 1 GiB 放多少 token |",
         "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
rows_seen = {}
try:
    for name, cfg in configs.items():
        for dtype in (torch.float32, torch.bfloat16):
            for tp in (1, 2, 16) if name == "Qwen3-0.6B" else (1, 2):
                set_tp_info(0, tp)
                cells = f"| {name} | {str(dtype)[6:]} | {tp} |"
                try:
                    pool = create_kvcache_pool(cfg, num_pages=1, page_size=1,
                                               dtype=dtype, device="meta")
                except ValueError:
                    lines.append(f"{cells} ValueError | — | — | — |")
                    continue
                per_token = pool.nbytes  # 一个槽位 = 一个 token
                heads = pool.local_kv_heads
                assert per_token == 2 * cfg.num_layers * heads * cfg.head_dim * dtype.itemsize
                rows_seen[name, dtype, tp] = per_token
                lines.append(f"{cells} {heads} | {human(per_token)} | {human(per_token * 4096)} "
                             f"| {2**30 // per_token:,} |")
finally:
    set_tp_info(0, 1)
qwen_bf16 = {tp: n for (name, dtype, tp), n in rows_seen.items()
             if name == "Qwen3-0.6B" and dtype == torch.bfloat16}
assert qwen_bf16[1] == 114_688 and qwen_bf16[16] == qwen_bf16[1] // 8
Markdown("\n".join(lines))

# %% [markdown]
# 几个值得记住的数：
#
# - Qwen3-0.6B 用 bf16，一个 token 112 KiB，一个 4096 token 的上下文 448 MiB；1 GiB 只放得下 9 千多个 token。同时服务多少请求，首先是被这个数卡住的。
# - 从 fp32 换成 bf16，KV 减半，能放的 token 翻倍；开 TP=2，每个 rank 的 KV 再减半——KV 池和权重一样被切开了。
# - TP=16 时每个 rank 14 KiB，是 TP=1 的 1/8 而不是 1/16：8 个 KV 头不够分，每个头复制了两份。
# - SmolLM2 只有 3 个 KV 头，TP=2 无论切还是复制都不行，建池子时直接报错（TP=3 可以：每个 rank 一个头）。

# %% [markdown]
# ## 页表：行是请求，列是位置，格子里是槽位
#
# 池子只管存，谁用哪些槽位记在**页表**里：一个 int32 张量 `[max_running_reqs + 1, max_seq_len]`，由第 6 章的 Engine 创建，放在设备上。第 `row` 行是一个请求，`page_table[row, pos]` 是它第 `pos` 个 token 的槽位。名字叫“页”表，存的却是**槽位**而不是页号，这是有意的：注意力后端要的就是“第 pos 个 token 在哪”，按槽位存就是一次查表，`page_size` 是 1 还是 16 都不影响读的代码。
#
# 槽位和页的关系只有一条规则：
#
# `page_table[row, pos] = 页号 × page_size + pos % page_size`
#
# 也就是请求的第 0 到 `page_size − 1` 个 token 在它的第一页，接下来 `page_size` 个在第二页，依此类推；页号由分配器决定，不必相邻。由此推出给位置 `[start, end)` 填槽位的做法：`pos % page_size == 0` 的位置开一页新页，其余位置接在 `page_table[row, pos − 1]` 的下一个槽位上。
#
# ### PageAllocator：空闲页在 CPU 上，槽位写进设备上的页表

# %% tags=["remove-input"]
listing("minisgl/kvcache/allocator.py", "PageAllocator.__init__")

# %% tags=["remove-input"]
listing("minisgl/kvcache/allocator.py", "PageAllocator.pages_needed")

# %% tags=["remove-input"]
listing("minisgl/kvcache/allocator.py", "PageAllocator.alloc_pages")

# %% [markdown]
# 空闲页是一个普通的 Python 列表，当栈用：`pop()` 从末尾取，还回来的页压回末尾，下次最先用到。初始是 `[n−1, …, 1, 0]`，所以一开始按 0、1、2…… 的顺序发出，图里的页号就是这么来的。`_is_free` 是一张“哪些页空闲”的表，只用来抓重复释放。
#
# 这些记账全在 CPU 上，是故意的：调度器每一步都要问“还剩几页”“这批要几页”，这些数如果放在 GPU 上，每问一次就是一次设备同步。`pages_needed(start, end)` 数的是区间里 `pos % page_size == 0` 的位置有几个，用整数公式 `div_ceil(end, ps) − div_ceil(start, ps)` 算，不碰页表。
#
# 真正往页表里写的是 `alloc_slots`：

# %% tags=["remove-input"]
listing("minisgl/kvcache/allocator.py", "PageAllocator.alloc_slots")

# %% [markdown]
# 它把 `[start, end)` 切成两段：
#
# 1. **尾巴** `[start, start + tail)`：落在请求最后一页还没用完的部分。`tail = min(end, align_ceil(start, ps)) − start`，`start` 正好在页首时为 0。这段的槽位是 `page_table[row, start − 1] + 1, + 2, …`——读上一个位置的槽位，在设备上加一串偏移，不把页表读回 CPU。
# 2. **新页** `[start + tail, end)`：向 `alloc_pages` 要 `pages_needed(start, end)` 页，每页展开成 `page_size` 个连续槽位，最后一页可能只用到前几个。
#
# 两段拼起来就是 `out_loc`：这一步这些 token 的 K/V 要写进的槽位。它同时被写进页表的 `[start, end)`，以后每一步注意力都从页表读回它们。
#
# 用几行代码把图里的状态复现出来（8 页的池子、`page_size = 4`、三个请求先 prefill 5、8、3 个 token，再各 decode 一步），和图对一对：

# %%
from minisgl.scheduler.table import TableManager

PS = 4
# 3 个请求 + 1 个占位行；-1 表示“没分配过”
page_table = torch.full((4, 16), -1, dtype=torch.int32)
alloc = PageAllocator(num_pages=8, page_size=PS, device="cpu")
table = TableManager(max_running_reqs=3, page_table=page_table)
lengths = {}
for prompt_len in (5, 8, 3):  # prefill
    row = table.allocate()
    alloc.alloc_slots(page_table, row, 0, prompt_len)
    lengths[row] = prompt_len
for row in lengths:  # decode 一步：每个请求多 1 个 token
    out_loc = alloc.alloc_slots(page_table, row, lengths[row], lengths[row] + 1)
    where = "页首，新页" if lengths[row] % PS == 0 else "接在最后一页里"
    print(f"行 {row} 的位置 {lengths[row]:>2}：{where} → 槽位 {out_loc.item()}")
    lengths[row] += 1
print(page_table)
print(f"空闲页 {alloc.num_free_pages} / 8")
assert page_table[0, :6].tolist() == [0, 1, 2, 3, 4, 5]
assert page_table[1, :9].tolist() == [8, 9, 10, 11, 12, 13, 14, 15, 20]
assert page_table[2, :4].tolist() == [16, 17, 18, 19] and alloc.num_free_pages == 2

# %% [markdown]
# 三个 decode 位置里只有行 1 的位置 8 落在页首、要了一页新页；另外两个接在各自最后一页的空位里，不用找分配器要任何东西。`-1` 是这个演示自己填的，表示“从没分配过”；真实的页表用 0 初始化，没分配的位置里是什么都无所谓——调度器和注意力后端只读 `[0, device_len)`。
#
# ### 页大小：1、4 还是 16
#
# 同样三个请求，换成 `page_size = 1` 和 `16` 再分一遍：

# %%
def fill(page_size, num_slots=64):
    pt = torch.full((3, 16), -1, dtype=torch.int32)
    al = PageAllocator(num_slots // page_size, page_size, device="cpu")
    for row, n in enumerate((5, 8, 3)):
        al.alloc_slots(pt, row, 0, n)
    for row, n in enumerate((5, 8, 3)):
        al.alloc_slots(pt, row, n, n + 1)
    return pt, al


for ps in (1, 4, 16):
    pt, al = fill(ps)
    used = al.num_used_pages * ps
    print(f"page_size={ps:<2}：{al.num_used_pages:>2} 页 = {used:>2} 个槽位"
          "（真正存 token 的 19 个）")
    for row in range(3):
        n = (6, 9, 4)[row]
        print(f"    行 {row}：{pt[row, :n].tolist()}")
assert fill(1)[0][1, :9].tolist() == [5, 6, 7, 8, 9, 10, 11, 12, 17]

# %% [markdown]
# `page_size = 1` 时页就是槽位，每个 token 单独分配，一个槽位都不浪费，但槽位在请求之间交错（行 1 的第 9 个 token 排在行 2 的后面）。`page_size = 16` 时每个请求至少占一整页：19 个 token 用了 48 个槽位。
#
# 页大一点买到的东西：
#
# - **分配次数少**。decode 时只有每 `page_size` 步才需要一页新页，其余步只是在已有的页里往后数。
# - **按块读的内核**。FlashInfer、TensorRT-LLM 这类注意力内核按页读 K/V：元数据是一串页号（长度是 token 数的 1/`page_size`），一页是一段连续内存，一次搬一整块。有的内核只支持特定的页大小——上游 mini-sglang 用 TensorRT-LLM 后端时，`page_size` 不是 16、32、64 之一就强制改成 64。
# - **前缀缓存按页共享**（第 9 章）。radix 树的节点管的是整页，页越大，树越小；代价是只有完整的页能共享。
#
# 付出的代价是**内部碎片**：每个请求最后一页平均空着 `(page_size − 1) / 2` 个槽位。下面拿 200 个随机请求（先 prefill 1–600 个 token，再一个一个 decode 1–60 步），用真的分配器在四种页大小下各跑一遍，量一量：

# %%
rng = random.Random(0)
# 每个请求：(提示长度, decode 步数)
workload = [(rng.randint(1, 600), rng.randint(1, 60)) for _ in range(200)]
total = sum(p + d for p, d in workload)
lines = ["| page_size | 要新页的次数 | 分出去的槽位 | 空着的槽位 | 占比 "
         "| 每个请求平均空着 | (page_size − 1) / 2 |",
         "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
waste_per_req = {}
for ps in (1, 4, 16, 64):
    al = PageAllocator(total // ps + len(workload), ps, device="cpu")
    pt = torch.zeros(len(workload), 700, dtype=torch.int32)
    for row, (p, d) in enumerate(workload):
        al.alloc_slots(pt, row, 0, p)  # prefill
        for pos in range(p, p + d):  # decode：一次一个 token
            al.alloc_slots(pt, row, pos, pos + 1)
    slots = al.num_used_pages * ps
    waste_per_req[ps] = (slots - total) / len(workload)
    waste = slots - total
    lines.append(f"| {ps} | {al.num_used_pages:,} | {slots:,} | {waste:,} | {waste / slots:.1%} "
                 f"| {waste_per_req[ps]:.1f} | {(ps - 1) / 2:.1f} |")
assert waste_per_req[1] == 0 and all(w < ps for ps, w in waste_per_req.items())
print(f"200 个请求，一共 {total:,} 个 token")
Markdown("\n".join(lines))

# %% [markdown]
# “要新页的次数”就是分配器真正干活的次数：`page_size = 16` 比 1 少了 15/16。浪费的槽位每个请求平均约 `(page_size − 1) / 2` 个，和长度无关——请求越长，占比越小。换算成 Qwen3-0.6B 的 bf16，`page_size = 16` 时每个请求平均浪费 7.5 × 112 KiB ≈ 0.8 MiB，和按 `max_tokens = 1024` 预留动辄上百 MiB 比起来不值一提；`page_size = 64` 浪费的就多了，所以只在内核确实需要时才用大页。本书的 CPU 实现默认 `page_size = 1`，第 17 章换更快的后端时再看页大小。
#
# ### 接着用最后一页
#
# decode 每步只给一个请求加一个 token，`alloc_slots` 在这里最常见的情况就是“尾巴”那一支：位置不在页首，槽位是上一个位置加一。自测第 2 题的请求（页 7、2，已有 6 个 token）连走四步：

# %%
al = PageAllocator(num_pages=8, page_size=4, device="cpu")
al.alloc_pages(8)
al.free_pages([7, 2, 5])  # 只留这三页空闲；之后按 7、2、5 的顺序发出
pt = torch.full((1, 16), -1, dtype=torch.int32)
print(f"prefill 6 个 → {al.alloc_slots(pt, 0, 0, 6).tolist()}")
for pos in range(6, 10):
    need = al.pages_needed(pos, pos + 1)
    slot = al.alloc_slots(pt, 0, pos, pos + 1).item()
    print(f"位置 {pos}：要 {need} 页新页 → 槽位 {slot}")
assert pt[0, :10].tolist() == [28, 29, 30, 31, 8, 9, 10, 11, 20, 21]

# %% [markdown]
# 位置 6、7 接在页 2 里；位置 8 是页首，拿到页 5（槽位 20）；位置 9 又接在页 5 里。`alloc_slots` 的前提是 `[0, start)` 已经由之前的调用填好了——它读 `page_table[row, start − 1]`，不检查那里是不是真的分配过（检查要读设备上的页表）。调度器保证这一点：它只为 `[cached_len, device_len)` 分配，而 `[0, cached_len)` 一定是以前分过的（或者前缀缓存匹配上、抄进页表的，第 8 章）。

# %% [markdown]
# ## 页不够：报错，而且什么都不改
#
# `alloc_slots` 里顺序很要紧：先 `alloc_pages(pages_needed(...))`——页不够就在这里抛 `OutOfPagesError`，此时空闲页一页没动、页表一格没写；够了才算槽位，最后一次性写进页表。看一个“边走边拿”的反面写法会出什么事：

# %%
from minisgl.kvcache import OutOfPagesError


def naive_alloc_slots(alloc, page_table, row, start, end):  # 反面教材：边走边拿页
    for pos in range(start, end):
        if pos % alloc.page_size == 0:
            # 页不够时在这里抛错，前面拿走的页已经回不来了
            page = alloc.alloc_pages(1)[0]
            page_table[row, pos] = page * alloc.page_size
        else:
            page_table[row, pos] = page_table[row, pos - 1] + 1


for name, fn in [("边走边拿", naive_alloc_slots),
                 ("alloc_slots", PageAllocator.alloc_slots)]:
    al = PageAllocator(num_pages=6, page_size=4, device="cpu")
    pt = torch.full((2, 32), -1, dtype=torch.int32)
    al.alloc_slots(pt, 0, 0, 10)  # 请求 0 占 3 页，剩 3 页
    try:
        fn(al, pt, 1, 0, 13)  # 请求 1 要 13 个 token = 4 页
    except OutOfPagesError as e:
        print(f"{name}：{e}")
    print(f"    之后空闲页 {al.num_free_pages}，页表第 1 行 {pt[1, :13].tolist()}")
    if fn is PageAllocator.alloc_slots:
        assert al.num_free_pages == 3 and torch.all(pt[1] == -1)
        al.free_slots(pt, 0, 10)  # 请求 0 结束，页还回来
        out = al.alloc_slots(pt, 1, 0, 13)  # 调度器重试：这次够了
        print(f"    请求 0 结束后重试：拿到 {len(out)} 个槽位，"
              f"空闲页 {al.num_free_pages}")

# %% [markdown]
# “边走边拿”失败时已经拿走了 3 页，页表也写了一半。可这个请求根本没被接纳，它的长度没有记进任何账里，将来不会有人为它调用 `free_slots`——这 3 页永远丢了。一个长期运行的服务每次在页不够时漏几页，池子就一点点缩小，直到什么请求都放不进去。
#
# 这对调度器（第 7、8 章）尤其要紧，因为“页不够”在那里是**正常情况**，不是故障：显存满了，调度器就这一轮先不收新请求，等别的请求结束再试；或者从前缀缓存里赶走一些没人用的页（第 9 章）再试。每一次重试都假定上一次失败没有留下任何痕迹。`alloc_slots` 给的保证是**一次调用**要么全成、要么全不变。一批里有好几个请求时，调度器应当先把整批的 `pages_needed` 加起来和 `num_free_pages` 比，而不是一个个分、分到一半失败——`OutOfPagesError` 的文档字符串说的就是这件事：它是最后一道防线，不是常规的流程控制。

# %% [markdown]
# ## free_slots：按页还
#
# 请求结束时，它的页要还回池子：

# %% tags=["remove-input"]
listing("minisgl/kvcache/allocator.py", "PageAllocator.free_slots")

# %% tags=["remove-input"]
listing("minisgl/kvcache/allocator.py", "PageAllocator.free_pages")

# %% [markdown]
# 页表里没有“页号”，可每页第一个位置的槽位整除 `page_size` 就是页号，所以 `page_table[row, start:length:page_size] // page_size` 一行就取出了这个请求的全部页。`free_pages` 先检查再动手：页号越界、同一次里重复、或者本来就空闲，都报错而且一页都不还——和 `alloc_slots` 同一个原则。重复释放是引擎里最阴险的错误之一：同一页进了空闲列表两次，就会先后发给两个请求，它们互相覆盖对方的 K/V，输出变成乱码，却没有任何地方报错。
#
# `start` 参数让一个请求只还后面的一部分页，它必须在页的边界上：一页只能整页还，页里前几个槽位还有人用，就不能还。第 8 章的缓存管理器会用到它：请求结束时，前面整页整页的 K/V 交给前缀缓存留着，只把尾巴上的页还回来。页表那一行的内容不清除，下一个拿到这一行的请求会覆盖它。

# %%
al = PageAllocator(num_pages=8, page_size=4, device="cpu")
pt = torch.full((2, 32), -1, dtype=torch.int32)
al.alloc_slots(pt, 0, 0, 14)  # 14 个 token = 4 页
# 只还后两页：前 8 个 token（两整页）假装留给了前缀缓存
al.free_slots(pt, 0, 14, start=8)
print(f"还了后两页：在用 {al.num_used_pages} 页")
for bad in (dict(length=8, start=2), dict(length=14, start=8)):
    try:
        al.free_slots(pt, 0, **bad)
    except ValueError as e:
        print(f"free_slots({bad}) → {e}")
assert al.num_used_pages == 2

# %% [markdown]
# 还有一点和设备有关：`free_slots` 要把页号从页表读回 CPU（`.tolist()`），在 GPU 上这是一次同步。分配不需要读页表（尾巴在设备上算），释放却需要，这是本书实现的一个取舍；上游把空闲列表本身放在设备上，释放时直接在设备上拼接，不读回来（见“与官方的差异”）。

# %% [markdown]
# ## TableManager 与 token pool
#
# 页表的行也是一种要分配的资源：同时运行的请求最多 `max_running_reqs` 个，每个占一行。`TableManager` 管这些行，顺便持有 token pool：

# %% tags=["remove-input"]
listing("minisgl/scheduler/table.py", "TableManager.__init__")

# %% [markdown]
# 几个细节：
#
# - 页表有 `max_running_reqs + 1` 行，最后一行不发给请求。第 18 章用 CUDA Graph 重放 decode 时，批大小要补齐到固定档位，补进去的占位请求就用这一行（上游让它指向池子里专门多留的一页）。
# - 行号就是 `Req.table_idx`。请求进门时 `allocate()` 一行，结束时 `free()` 还回来；`available_size` 是调度器决定“还能再收几个请求”时要看的第二个数（第一个是空闲页数）。
# - `token_pool = torch.zeros_like(page_table)`：同形状、同设备、int32，`(row, pos)` 那一格存的是那个位置的 token id。用 0 初始化而不是 `empty`，是因为占位请求也会从这里读 token——读到的必须是一个合法的词表下标。
#
# ### 为什么 token id 要放在页表旁边
#
# 有了页表和 token pool，调度器拼一批的输入只需要两次索引，用的是**同一对下标**：每个要算的 token 属于哪一行、在第几个位置。decode 时每个请求一个 token，位置是 `device_len − 1`：

# %%
tm = TableManager(max_running_reqs=3, page_table=torch.zeros(4, 16, dtype=torch.int32))
al = PageAllocator(num_pages=8, page_size=4, device="cpu")
prompts = [[100, 101, 102, 103, 104],
           [200, 201, 202, 203, 204, 205, 206, 207],
           [300, 301, 302]]
device_len = {}
for ids in prompts:  # 进门：领一行，把提示写进 token pool，分好 prefill 的槽位
    row = tm.allocate()
    tm.token_pool[row, :len(ids)] = torch.tensor(ids, dtype=torch.int32)
    al.alloc_slots(tm.page_table, row, 0, len(ids))
    device_len[row] = len(ids)

for step in range(2):
    # 假装这是上一步在设备上采样出的 token：直接写进 token pool 的 (row, device_len)
    sampled = torch.tensor([7 + step, 17 + step, 27 + step], dtype=torch.int32)
    rows = torch.tensor(list(device_len))
    tm.token_pool[rows, torch.tensor(list(device_len.values()))] = sampled
    for row in device_len:
        device_len[row] += 1
    # 下一步 decode：位置 = device_len - 1；先给新位置分槽位，再用同一对下标取两样东西
    positions = torch.tensor([n - 1 for n in device_len.values()])
    for row, pos in zip(rows.tolist(), positions.tolist()):
        al.alloc_slots(tm.page_table, row, pos, pos + 1)
    input_ids = tm.token_pool[rows, positions]
    out_loc = tm.page_table[rows, positions]
    print(f"decode {step + 1}：positions={positions.tolist()}  "
          f"input_ids={input_ids.tolist()}  out_loc={out_loc.tolist()}")
    assert torch.equal(input_ids, sampled)
print(f"token pool 第 0 行：{tm.token_pool[0, :7].tolist()}")

# %% [markdown]
# 上一步采样出的 token 从没离开过“设备”：它被写进 token pool，下一步按 `(rows, positions)` 取出来就是 `input_ids`。在 GPU 上这意味着准备下一步的输入**不需要等**新 token 拷回 CPU——第 11 章的重叠调度正是靠这一点，让 GPU 算第 k+1 步的同时，CPU 才慢慢处理第 k 步拷回来的 token（第 1 章的 `append_host` 允许 CPU 上的 `input_ids` 落后，说的就是这件事）。prefill 时也一样：每个请求贡献 `extend_len` 个 token，`rows` 里同一行重复 `extend_len` 次，`positions` 是 `arange(cached_len, device_len)`，一次索引拿到整批的 `input_ids` 和 `out_loc`。
#
# 为什么要和页表**同形状**？因为两者用同一套下标：只要算一次 `(rows, positions)`，`out_loc` 和 `input_ids` 就都有了，不需要第二套“第几个请求的 token 存在哪”的记账。

# %% [markdown]
# ## 接下来谁用它们
#
# - **注意力后端（第 5 章）**。前向时每一层先 `store_kv(k, v, batch.out_loc, layer)`，把这一步新算的 K/V 写进池子；再按 `page_table[req.table_idx, :device_len]` 把这个请求全部位置的 K/V 取出来做注意力。这一章的 main 和测试里“按页表取回、和写进去的一模一样”，就是注意力后端读 K/V 的方式。
# - **缓存管理与 radix 前缀缓存（第 8、9 章）**。两个请求有同样的前缀（比如同一段系统提示），它们前面那些 token 的 K/V 完全相同，没有必要存两份：把同样的槽位号写进两行页表，两个请求就读同一份 K/V。下面试一下——也顺便看到这件事为什么需要专门的缓存管理器：

# %%
pool = MHAKVCachePool(num_kv_heads=2, num_layers=1, head_dim=4, num_pages=8,
                      page_size=4, dtype=torch.float32, device="cpu")
al = PageAllocator(num_pages=8, page_size=4, device="cpu")
pt = torch.full((3, 16), -1, dtype=torch.int32)
out_loc = al.alloc_slots(pt, 0, 0, 6)  # 请求 A：6 个 token，前 4 个是公共前缀
pool.store_kv(torch.randn(6, 2, 4), torch.randn(6, 2, 4), out_loc, 0)
pt[1, :4] = pt[0, :4]  # 请求 B 和 A 共享第一整页：只抄槽位号，不抄 K/V
out_b = al.alloc_slots(pt, 1, 4, 7)  # B 自己的部分从位置 4 开始，是页首，拿新页
pool.store_kv(torch.randn(3, 2, 4), torch.randn(3, 2, 4), out_b, 0)
print(f"A 的页表行 {pt[0, :6].tolist()}，B 的页表行 {pt[1, :7].tolist()}")
assert torch.equal(pool.k_cache(0)[pt[1, :4]], pool.k_cache(0)[pt[0, :4]])
al.free_slots(pt, 0, 6)  # A 结束，把自己的页全还了——包括和 B 共享的那页
try:
    al.free_slots(pt, 1, 7)
except ValueError as e:
    print(f"B 结束：{e}")

# %% [markdown]
# 共享本身只是抄几个槽位号，可释放就麻烦了：A 结束时把共享的页 0 也还了，此刻 B 还在用它——如果分配器接着把页 0 发给别人，B 的前缀 K/V 就被覆盖了；等 B 结束再还一次，又是重复释放（分配器抓住了它，报错且不改任何东西）。所以共享的页不能由请求自己还：第 8 章的缓存管理器和第 9 章的 radix 树会接管这件事，记住每一页被几个请求引用、哪些页进了前缀缓存，只有没人用了才真正还给分配器。这也是共享只能按**整页**来的原因：B 从位置 4 开始写自己的 token，如果共享的那页里还有空位，B 会写进 A 的页里。

# %% [markdown]
# ## 运行
#
# 把本章的 main 跑一遍（输出就是在本章的树里真实跑出来的）：

# %%
run("python examples/ch04_kvcache.py")

# %% [markdown]
# 值得注意的地方：
#
# - **第一节**：SmolLM2 一个 token 45 KiB（fp32），4096 个 token 就是 180 MiB，已经是这个 135M 模型自己 fp32 权重（约 540 MB）的三分之一。`k_cache(0)` 是池子的视图，不是拷贝。Qwen3-0.6B 在 TP=16 时每层的 K 还有 1 个头：复制，不是切没了。
# - **第二节**：`需要的新页 [2, 2, 1]` 正是 `div_ceil(长度, 4)`。uid 1 的 8 个 token 正好两整页，槽位 8–15 连续；三个请求的页按 0、1、2…… 的顺序发出。
# - **第三节**：只有 uid 1 的位置 8 落在页首，拿到页 5（槽位 20）；另外两个接在各自的最后一页里。“空闲页 2 / 8”——对照开头的图。
# - **第四节**：uid 1 结束后还回页 `[2, 3, 5]` 和第 1 行，新来的 uid 3 拿到的正是它们：行是栈，页也是栈，刚还回来的最先用到，而且按原来的顺序。重复释放被拦下。最后要 3 页只剩 2 页，报错之后空闲页数和 uid 2 的页表行都没有变。

# %% [markdown]
# ## 与官方的差异
#
# 概念和名字与上游 mini-sglang 一致——一块 `[2, layers, …]` 的缓冲区、页表存 token 的槽位、最后一行留给占位请求、和页表同形状的 token pool——差别在分配器放在哪、以及出错时怎么办。
#
# - **池子的形状**。上游的 `MHAKVCache` 把页显式写进形状：`[2, num_layers, num_pages, page_size, local_kv_heads, head_dim]`，写入时再 `view` 成 `[num_pages × page_size, heads, head_dim]`；内存布局和我们的五维完全相同，只是少一次 `view`。上游的 `store_kv` 调用自己写的 CUDA 内核 `store_cache`（`minisgl.kernel`），我们用 PyTorch 的索引赋值。上游 Python 这一侧不检查 `store_kv` 的形状和 dtype。
# - **没有单独的分配器**。上游的分配和释放在调度器的 `CacheManager` 里，和前缀缓存写在一起：空闲页是**设备上**的一个 int32 张量 `free_slots`（存的是每页第一个槽位），`_allocate` 从前面切、`_free` 拼到后面（先进先出），全程不把数据读回 CPU。我们的 `PageAllocator` 用 CPU 上的列表当栈，释放时要读一次页表；好处是它能检查重复释放和越界，上游不检查。
# - **一次写整页**。上游 `allocate_paged` 为一批请求算出总共要几页、一次拿齐，再由 `_write_page_table` 把每一页的**全部** `page_size` 个位置写进页表——包括这个请求还没走到的位置。所以 decode 到页内的位置时不需要分配，槽位早就在页表里了，这一步的 `out_loc` 直接是 `page_table[行, 位置]`。我们只写 `[start, end)`，页内的后续位置按 `page_table[row, start − 1] + 1` 现算。
# - **页不够时**。上游的 `_allocate` 在空闲页不够时先从前缀缓存里赶走一些页，再 `assert` 一定够；真正的防线在接纳请求的时候：`PrefillAdder._try_allocate_one` 按“提示 + 最多输出”估算，超出可用空间就不接纳。我们的分配器本身保证失败不改任何东西（`OutOfPagesError`），调度器怎么接纳留到第 7、8 章。
# - **TableManager**。上游的空闲行是 `list(range(max_running_req))` 用 `pop()` 取，第一个请求拿到的是最后一行；没有重复释放的检查。token pool 同样是 `zeros_like(page_table)`，注释里写明了原因：占位请求也从这里取 input ids。
# - **Engine 里的那部分**（第 6 章）：上游的页表是 `torch.zeros((max_running_req + 1, 对齐到 32 的 max_seq_len), int32)`；池子多分一页（`num_pages + 1`），占位请求那一行全部指向这一页。
#
# ### 官方实现
#
# 上游仓库 `sgl-project/mini-sglang`：
#
# - 池子：`python/minisgl/kvcache/base.py` · `BaseKVCachePool`；`python/minisgl/kvcache/mha_pool.py` · `MHAKVCache`（`store_kv` 调 `minisgl.kernel.store_cache`）
# - 分配与释放：`python/minisgl/scheduler/cache.py` · `CacheManager.allocate_paged`、`CacheManager._allocate`、`CacheManager._free`、`CacheManager._page_to_token`、`_write_page_table`、`CacheManager.lazy_free_region`（一轮里的释放攒到最后一起拼接）
# - 页表的行与 token pool：`python/minisgl/scheduler/table.py` · `TableManager`
# - 谁在用：`python/minisgl/scheduler/scheduler.py` · `Scheduler._prepare_batch`（`batch.out_loc = page_table[input_mapping]`）、`Scheduler._forward`（`batch.input_ids = token_pool[input_mapping]`，采样后 `token_pool[write_mapping] = next_tokens_gpu`）、`_make_input_tuple`、`_make_write_tuple`；`python/minisgl/scheduler/prefill.py` · `PrefillAdder._add_one_req`（提示的 token 用 pinned 内存非阻塞地拷进 token pool）、`PrefillAdder._try_allocate_one`（接纳时按估算长度预留）
# - 池子和页表的创建：`python/minisgl/engine/engine.py` · `Engine.__init__`、`Engine._determine_num_pages`；页大小与内核：`_adjust_config`（TensorRT-LLM 后端的页大小）

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch04_kvcache.py`，不需要模型。挑三个最能说明问题的看。
#
# 第一个是分配器的“模型检验”：随机地开始、延长（decode 一个或一段）、结束一批请求，每一步都检查两件事——任何两个活着的请求没有共用的槽位，已用页数恰好是每个请求 `ceil(长度 / page_size)` 之和。页表写错一位、少还一页、多还一页，都会在这里暴露：

# %% tags=["remove-input"]
listing("tests/test_ch04_kvcache.py", "test_many_requests_never_share_slots")

# %% [markdown]
# 第二个钉住“页不够时什么都不改”：失败前后页表逐格相等、空闲页数相等；失败之后分配器照常工作，先把请求 0 最后一页的空位填满，再用剩下的页。

# %% tags=["remove-input"]
listing("tests/test_ch04_kvcache.py", "test_out_of_pages_changes_nothing")

# %% [markdown]
# 第三个把池子和页表连起来：四个请求先 prefill、再一步步 decode，每步每层写入随机的 K/V；最后按页表取回每个请求的全部位置，必须和当初写进去的按顺序逐位相等。池子事先填满 `nan`，读到任何一个没写过的槽位都会失败。这正是下一章注意力后端读 K/V 的方式。

# %% tags=["remove-input"]
listing("tests/test_ch04_kvcache.py", "test_store_then_gather_through_page_table")

# %% [markdown]
# 其余测试覆盖池子的形状和视图、`store_kv` 只写 `out_loc` 的那几个槽位、TP 下的本地 KV 头数（包括复制和分不开的情况）、逐个位置对照页表规则、重复释放与各种坏参数、`TableManager` 的行分配。在本章的树里跑全部：

# %%
run("python -m pytest -q --color=no tests/test_ch04_kvcache.py")

# %% [markdown]
# ## 怎么讲清楚
#
# 推理引擎启动时把 KV 缓存一次分成一整块：`[2, 层数, 槽位数, 本地 KV 头数, head_dim]`，一个槽位放一个 token 在一层的 K/V，张量并行时每个 rank 只存自己的 KV 头（KV 头比 rank 少就复制）。一个 token 的 K/V 有多大可以直接算：2 × 层数 × KV 头数 × head_dim × 字节数，Qwen3-0.6B 用 bf16 是 112 KiB，1 GiB 只够九千多个 token，所以显存怎么用决定了并发。每个请求按 token 领槽位，槽位以页为单位发放、不要求相邻，记在页表里：行是请求、列是位置、格子里是槽位号，这样既不用按最大长度预留，也没有连续分配的外部碎片；代价是每个请求最后一页平均空着 (page_size − 1)/2 个槽位，换来分配次数少、内核能按块读、前缀缓存能按页共享。分配器的空闲页记在 CPU 上，页不够时整次调用失败、什么都不改，因为调度器会在腾出空间后重试；释放按页来，并且要抓重复释放，否则同一页发给两个请求，K/V 互相覆盖却不报错。页表旁边有一个同形状的 token pool，调度器用同一对 (行, 位置) 下标在设备上一次取出 `out_loc` 和 `input_ids`，采样出的 token 也直接写回设备，不必等 CPU。

# %% [markdown]
# ## 练习
#
# 1. **一次写整页**。上游在分配一页时就把这页全部 `page_size` 个位置写进页表（哪怕请求还没走到那里）。如果我们也这么做，`alloc_slots` 哪一支可以删掉？页表里“还没走到的位置”有了槽位，会不会让哪个读页表的地方出错？
# 2. **预算和并发**。给 Qwen3-0.6B（bf16、TP=1）10 GiB 的 KV 池，`page_size = 16`：能放多少页、多少个 token？64 个请求、每个平均 2000 个 token，放得下吗？如果像第 0 章那样每个请求按 4096 预留，能同时跑几个？
# 3. **只共享整页**。`page_size = 4`，请求 A 有 14 个 token，结束时前缀缓存想把它前面的 K/V 留给以后的请求。哪些位置能留下、`free_slots` 应该怎么调？为什么位置 12、13 不能留？
# 4. **哪里会同步**。页表和池子在 GPU 上，空闲页列表在 CPU 上。`alloc_slots`、`free_slots`、`store_kv` 里，哪些操作会让 CPU 等 GPU？如果想让 `free_slots` 也不同步，可以怎么改？
#
# ??? success "参考答案"
#
#     1. “尾巴”那一支可以删掉：`[start, end)` 里不在页首的位置，它所在的页早在页首那一步就分好了，槽位已经在页表里，`out_loc` 直接就是 `page_table[row, start:end]`，只有页首的位置才需要新页（写入时写整页）。读页表的地方不会出错：注意力后端只读 `[0, device_len)`，`free_slots` 只看每页第一个位置，多写的那些格子从来不会被当作有效数据读到。这正是上游的做法，好处是 decode 时大多数步完全不用碰分配器，分配代码也更简单。
#     2. 每个 token 112 KiB，每页 16 个 token 1,792 KiB；10 GiB = 10,485,760 KiB，能放 5,851 页、93,616 个 token。64 个 2000 token 的请求各要 `ceil(2000 / 16) = 125` 页，共 8,000 页，放不下，最多约 46 个（5,851 // 125）。按 4096 预留时每个请求 256 页，只能跑 22 个。
#     3. 只有完整的页能留：位置 0–11（前 3 页）交给前缀缓存，`free_slots(page_table, row, 14, start=12)` 还回最后一页。位置 12、13 那一页只用了一半，如果留给以后的请求 B 共享，B 从位置 14 开始写自己的 token 时要么写进这页剩下的空位——那就写进了一页“公共”的页里，别的共享者读到的就错了——要么另起一页，页表规则 `槽位 = 页号 × page_size + pos % page_size` 就不再成立。所以前缀缓存按页对齐，尾巴的半页由请求自己还掉。
#     4. `alloc_slots`：页号来自 CPU 上的列表，`torch.tensor(pages, device=...)` 是一次主机到设备的拷贝，尾巴是设备上的加法，写页表是设备上的索引赋值——都不需要等 GPU 算完。`store_kv` 只看形状和 dtype，不读内容，也不同步。`free_slots` 里的 `.tolist()` 要把页表里的数读回 CPU，必须等之前写页表的操作完成，是一次同步。不同步的改法：（a）像上游那样把空闲页列表放在设备上，释放时 `torch.cat` 拼进去，分配时切片，页数 `len(free_slots)` 是张量的形状、CPU 上就知道；代价是丢掉了 CPU 上的重复释放检查。（b）在 CPU 上给每个请求另记一份它的页号列表（分配时就知道），释放时直接用，不读页表。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 12    # 把第 12 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 12     # 判题
# python practice/judge.py hint 12     # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - 服务里的 KV 缓存不能每个请求一块连续内存：按上限预留浪费大半，连续分配留下外部碎片。KV 池启动时一次分好，按槽位发放、不要求相邻。
# - 池子是一块 `[2, layers, slots, local_kv_heads, head_dim]` 的缓冲区，`k_cache(i)` / `v_cache(i)` 是视图；每个 rank 只存本地的 KV 头，KV 头不够分时复制。一个 token 的 K/V = 2 × 层数 × KV 头数 × head_dim × 字节数，Qwen3-0.6B bf16 是 112 KiB。
# - 页表 `[max_running_reqs + 1, max_seq_len]`：行是请求、列是位置、格子里是槽位，`槽位 = 页号 × page_size + pos % page_size`。页首的位置开新页，其余接着上一个槽位。
# - 页越大，分配越少、内核越好读、前缀缓存越省；代价是每个请求平均 (page_size − 1)/2 个槽位的内部碎片。
# - `alloc_slots` 失败时什么都不改，调度器可以放心重试；`free_slots` 按页还、只能从页边界开始，重复释放会被抓住。共享页需要引用计数，交给第 8、9 章。
# - token pool 和页表同形状，同一对 (行, 位置) 下标在设备上一次取出 `out_loc` 和 `input_ids`，采样出的 token 直接写回设备——下一章的注意力后端按页表读 K/V，第 11 章的重叠调度靠 token pool 不等 CPU。
