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
# # 第 4 章 KV 池、页表与 token 池
#
# 第 0 章给每条序列按“提示 + 最多生成多少”预留一块连续的 [KV 缓存](../glossary.md#kv-cache)，一个服务同时跑几十条序列时，这样既浪费又会碎。本章换成操作系统管内存的办法：启动时分好一整块 [KV 池](../glossary.md#kv-pool)，按固定大小的[页](../glossary.md#page)发给请求，用一张[页表](../glossary.md#page-table)记下每个 token 的 K/V 在哪个[槽位](../glossary.md#slot)。我们写三样东西：池子 `MHAKVCachePool`、分配器 `PageAllocator`、管页表行和 [token 池（token pool）](../glossary.md#token-pool) 的 `TableManager`。main 里三个请求共用 8 页，写进去的 K/V 按页表原样读回，一批装不下时报错而且什么都不改。

# %% tags=["remove-cell"]
from minibook.page import *
_ = setup(4)  # 赋值而不显示：返回的树路径随机器而变

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. Qwen3-0.6B（28 层、8 个 KV 头、head_dim 128）用 bfloat16，一个 token 的 K/V 占多少字节？TP=2 时每个 rank 呢？
# 2. `page_size = 4`，一个请求用的是 7 号页和 2 号页，页表这一行是 `[28, 29, 30, 31, 8, 9]`。位置 6、7、8 的槽位各是多少？
# 3. 池子剩 3 页，一批两个请求共要 4 页，单给第一个只要 2 页。为什么要整批报错，而不是先把第一个分了？
# 4. 在 GPU 上，`alloc_slots` 和 `free_slots` 会不会让 CPU 等 GPU？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 2 × 28 × 8 × 128 × 2 字节 = 114,688 字节（112 KiB）；TP=2 时每个 rank 只存 4 个 KV 头，56 KiB。
#     2. 位置 6、7 还在它的第 1 页（2 号页）里，槽位 10、11；位置 8 是页首，要一页新页 p，槽位 4p。
#     3. 这批没被接纳，先分掉的 2 页不属于任何在运行的请求，没人会还，池子就永远少了 2 页。整批先数页、够了再动手，失败时才能什么都不改，调度器可以放心重试。
#     4. 都不会：记账全在 CPU 的列表里，`free_slots` 不读页表；`alloc_slots` 把槽位经锁页内存用 `non_blocking=True` 拷上去，CPU 不等拷贝完成。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章新建 `minisgl/kvcache/`（接口 `base.py`、池子 `mha_pool.py`、分配器 `allocator.py`）和 `minisgl/scheduler/table.py`。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch04_kvcache.py`，不跑模型，只走一遍“K/V 存在哪儿”的记账：算 KV 池有多大；三个请求一批分槽位、写 K、按页表读回；decode 一步；一个请求结束、它的行和页给新请求；最后一批装不下。`python tools/steps.py check 4` 会搭出本章的树，跑这个 main 和测试。main 每一步做的事就是以后每一步前向之前要做的事：

# %% tags=["remove-input"]
listing("examples/ch04_kvcache.py", "main.step")

# %% [markdown]
# ## 按上限预留，将近一半空着
#
# 先量第 0 章的做法在服务里的代价。一个请求会生成多少事先不知道（遇到 EOS 就停），连续的一块又没法原地变长，只能按 `max_tokens` 预留。32 个请求的快照：提示 50–800 个 token，`max_tokens = 1024`，真实输出 10–1024 个，此刻都生成到一半：

# %%
import random

import torch

rng = random.Random(0)
MAX_TOKENS = 1024
# 每个请求：(提示长度, 真实的输出长度)
reqs = [(rng.randint(50, 800), rng.randint(10, MAX_TOKENS)) for _ in range(32)]
reserved = sum(prompt + MAX_TOKENS for prompt, _ in reqs)  # 按上限预留
in_use = sum(prompt + out // 2 for prompt, out in reqs)  # 此刻真正存着 K/V 的
print(f"预留 {reserved:,} 个 token 的位置，真正用到 {in_use:,} 个，"
      f"利用率 {in_use / reserved:.0%}")
assert in_use / reserved < 0.6

# %% [markdown]
# ## 连续分配：总量够，却放不下
#
# 就算每个请求的长度事先知道、一点不多留，连续分配还有[外部碎片](../glossary.md#fragmentation)。同一串随机的到达和离开（长度 64–1536），一边在 8192 个槽位里找一段够长的连续空间（first-fit，离开时合并相邻空洞），一边用本章的 `PageAllocator` 按 16 个槽位一页发：

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
    # 这里只用按页的接口 alloc_pages / free_pages，页表只是构造时要给的一张
    unused_table = torch.zeros(1, 1, dtype=torch.int32)
    alloc = PageAllocator(capacity // page_size, page_size, unused_table)
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
assert len(simulate("连续")[1]) > 100 and simulate("分页")[1] == []

# %% [markdown]
# 连续分配的拒绝大多发生在空闲总量够的时候：空闲槽位散成了小空洞，哪个都不够长。分页时一个请求的页不必相邻，只要空闲页数够就放得下，只在真满时拒绝。这就是 KV 池加页表的全部动机：一次分好，按页发放，不要求连续，由页表记住每个 token 在哪。

# %% [markdown]
# ## 一张图：三个请求共用一个池子
#
# ![page_size = 4 时三个请求共用一个 8 页的 KV 池：上面是页表（行 = 请求，列 = 位置，格子里是槽位号），中间是池子的 32 个槽位按页排开，下面是和页表同形状的 token 池；decode 一步用同一对 (行, 位置) 下标取出 out_loc 和 input_ids](../assets/ch04_paged_pool.svg)
#
# 这是 main 第三节结束时的状态。① 页表每行一个请求，第 j 列是它第 j 个 token 的槽位，粗竖线之间的 4 个位置同在一页；② 池子只是一排槽位，斜线格分出去了却还没有 token 住进来，这是[内部碎片](../glossary.md#fragmentation)；③ token 池和页表同形状，存的是 token id。

# %% [markdown]
# ## 池子是一整块，每层一个视图
#
# 注意力后端只通过 `k_cache(layer)`、`v_cache(layer)` 读池子，通过 `store_kv` 写（接口在 `base.py` · `BaseKVCachePool`）。唯一的实现是一块五维缓冲区：

# %% tags=["remove-input"]
listing("minisgl/kvcache/mha_pool.py", "MHAKVCachePool.__init__")

# %% [markdown]
# 形状是 `[2, 层数, 槽位数, 本地 KV 头, head_dim]`：第 0 维分 K 和 V，`k_cache(i)` 就是 `kv_buffer[0, i]`，一个不拷贝的视图。页在形状里没有自己的一维，它只是“连续 `page_size` 个槽位”的记账单位。启动时一次分好，运行中不再向显存分配器要内存。
#
# ??? note "深入：五个维度为什么这样排"
#
#     槽位在头的外面，所以一个 token 在一层的全部 K（`本地 KV 头 × head_dim` 个数）挨在一起，和注意力层算出的 `k`（`[T, heads, head_dim]`）一行对一行；同一页的 `page_size` 个槽位也挨在一起，按页读 K/V 的内核读一页就是读一段连续内存。层在槽位外面，所以每层的 K 是一段连续内存，内核拿一个指针就能读。全部层的 K 排完才是 V：`v_cache(0)` 的起点正好在 `num_layers` 个“一层”之后，下面的代码量了这个偏移。
#
#     [本地 KV 头](../glossary.md#local-kv-heads)来自 `minisgl.distributed.local_kv_heads`，和第 2 章切 qkv 投影用的是同一个函数，算出的 k 正好放得进池子。KV 头比 rank 少时（8 个 KV 头、TP=16）每个 rank 存 1 个头的副本：多花一倍 KV 显存，换来注意力不需要通信。

# %%
from minisgl.kvcache import MHAKVCachePool

pool = MHAKVCachePool(num_kv_heads=2, num_layers=3, head_dim=4, num_pages=5,
                      page_size=2, dtype=torch.float32, device="cpu")
print(pool)
layer_bytes = pool.num_slots * pool.local_kv_heads * pool.head_dim * 4  # 一层的 K，float32
base = pool.kv_buffer.data_ptr()
for name, view in [("k_cache(1)", pool.k_cache(1)), ("v_cache(0)", pool.v_cache(0))]:
    print(f"{name} 形状 {tuple(view.shape)}，从第 {(view.data_ptr() - base) // layer_bytes} "
          f"个“一层”开始，连续：{view.is_contiguous()}")
assert pool.v_cache(0).data_ptr() - base == pool.num_layers * layer_bytes

out_loc = torch.tensor([7, 2, 3], dtype=torch.int32)  # 槽位不必连续、不必有序
k = torch.randn(3, 2, 4)
pool.store_kv(k, -k, out_loc, layer_id=1)
assert torch.equal(pool.kv_buffer[0, 1, 7], k[0]) and torch.equal(pool.v_cache(1)[out_loc], -k)

# %% [markdown]
# `store_kv` 的活只有两行索引赋值：第 i 个 token 写进第 `out_loc[i]` 个槽位。它是内部调用，前面只有两个 `assert`，检查 CPU 上就知道的形状和 dtype，不读张量内容（在 GPU 上读内容就是一次同步）：

# %% tags=["remove-input"]
listing("minisgl/kvcache/mha_pool.py", "MHAKVCachePool.store_kv")

# %% [markdown]
# 一个 token 占多少字节可以直接算：`2 × 层数 × 本地 KV 头 × head_dim × 每个元素的字节数`。下面在 meta 设备上建池子（只有形状，不占内存），核对 `nbytes` 和公式：

# %%
from IPython.display import Markdown
from minibook.models import qwen3_06b_config, smollm2
from minisgl.distributed import set_tp_info
from minisgl.kvcache import create_kvcache_pool
from minisgl.models import ModelConfig


def human(n):
    return f"{n / 1024:,.1f} KiB" if n < 1024**2 else f"{n / 1024**2:,.0f} MiB"


configs = {"SmolLM2": ModelConfig.from_json(smollm2()),
           "Qwen3-0.6B": ModelConfig.from_json(qwen3_06b_config())}
lines = ["| 模型 | dtype | TP | 本地 KV 头 | 每个 token | 4096 个 token | 1 GiB 放多少 token |",
         "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
per_token_seen = {}
try:
    for name, cfg in configs.items():
        for dtype in (torch.float32, torch.bfloat16):
            for tp in (1, 2, 16) if name == "Qwen3-0.6B" else (1, 2):
                set_tp_info(0, tp)
                cells = f"| {name} | {str(dtype)[6:]} | {tp} |"
                try:
                    pool = create_kvcache_pool(cfg, num_pages=1, page_size=1,
                                               dtype=dtype, device="meta")
                except ValueError:  # 3 个 KV 头分不到 2 个 rank 上
                    lines.append(f"{cells} ValueError | — | — | — |")
                    continue
                per_token = pool.nbytes  # 一个槽位 = 一个 token
                heads = pool.local_kv_heads
                assert per_token == 2 * cfg.num_layers * heads * cfg.head_dim * dtype.itemsize
                per_token_seen[name, dtype, tp] = per_token
                lines.append(f"{cells} {heads} | {human(per_token)} "
                             f"| {human(per_token * 4096)} | {2**30 // per_token:,} |")
finally:
    set_tp_info(0, 1)
qwen = {tp: n for (name, dtype, tp), n in per_token_seen.items()
        if name == "Qwen3-0.6B" and dtype == torch.bfloat16}
assert qwen[1] == 114_688 and qwen[16] == qwen[1] // 8
Markdown("\n".join(lines))

# %% [markdown]
# Qwen3-0.6B 用 bf16 一个 token 112 KiB，1 GiB 只放得下 9 千多个 token：能同时服务多少请求，首先被这个数卡住。TP=16 时是 TP=1 的 1/8 而不是 1/16，因为 8 个 KV 头不够分、每个头复制了两份；SmolLM2 只有 3 个 KV 头，TP=2 建池子时就报错。

# %% [markdown]
# ## 页表存的是槽位：`页号 × page_size + pos % page_size`
#
# 页表是设备上的 int32 张量 `[max_running_reqs + 1, max_seq_len]`，`page_table[row, pos]` 是第 `row` 行请求第 `pos` 个 token 的槽位。存槽位而不是页号，注意力后端查一次表就拿到 K/V 的位置，`page_size` 是 1 还是 16 读的代码都一样。规则只有一条：一个请求的第 0 到 `page_size − 1` 个 token 在它的第 0 页，接下来的在第 1 页，依此类推，页号由分配器给，不必相邻。这条规则在代码里只写一次：

# %% tags=["remove-input"]
listing("minisgl/kvcache/allocator.py", "pages_to_slots")

# %% [markdown]
# `pages` 是一行按顺序用着的页。用的是 7 号页和 2 号页时，位置 3 到 5 跨过页边界，槽位从 31 跳到 8：

# %%
from minisgl.kvcache import pages_to_slots

print(pages_to_slots([7, 2], page_size=4), pages_to_slots([7, 2], 4, start=3, end=6))
assert pages_to_slots([7, 2], 4, 3, 6) == [31, 8, 9]

# %% [markdown]
# 给位置 `[start, end)` 分槽位时，`pos % page_size == 0` 的位置要一页新页，其余位置落在已有的最后一页里。分配器的记账全在 CPU 上：

# %% tags=["remove-input"]
listing("minisgl/kvcache/allocator.py", "PageAllocator.__init__")

# %% [markdown]
# 空闲页是一个栈（先发出 0、1、2 号页，还回来的页下次最先用到）；`_refs` 记每页被几方持有；`_rows` 记每一行按顺序用了哪些页。构造时绑定页表，之后谁都不必再把页表传进来。
#
# ??? note "深入：为什么是引用计数，而不是“空闲/占用”两态"
#
#     计数现在就拦住两种错：`free_pages` 先查每页的计数够不够减，同一页还两次当场断言失败（“被多还了”），而不是在空闲栈里出现两次、被发给两个请求；`alloc_slots` 往一行最后一页的空位里写之前，断言这一页的计数是 1，只归这一行。本章里计数只在 0 和 1 之间，`free_pages` 的意思是“放下一次持有”，到 0 才回到空闲栈；以后页也能被前缀缓存持有（第 9 章），这套表示不用改。

# %% [markdown]
# ## 一批请求：要么全分到，要么什么都不改
#
# 调度器一步要给一批请求分槽位。先看最顺手的写法：一个一个分。池子 3 页、`page_size = 4`，两个 8 token 的提示共要 4 页：

# %%
from minisgl.core import Req, SamplingParams
from minisgl.kvcache import OutOfPagesError


def make_req(row, prompt_len, output_len=1):
    ids = torch.arange(100 * (row + 1), 100 * (row + 1) + prompt_len, dtype=torch.int32)
    return Req(input_ids=ids, table_idx=row, cached_len=0, output_len=output_len, uid=row,
               sampling_params=SamplingParams(max_tokens=output_len), cache_handle=None)


def one_by_one(alloc, reqs):  # 反面教材：一个一个分，分到一半失败
    return torch.cat([alloc.alloc_slots([req]) for req in reqs])


free_after = {}
for name, fn in [("一个一个分", one_by_one), ("alloc_slots", PageAllocator.alloc_slots)]:
    page_table = torch.full((3, 16), -1, dtype=torch.int32)  # -1：从没分配过
    alloc = PageAllocator(num_pages=3, page_size=4, page_table=page_table)
    try:
        fn(alloc, [make_req(0, 8), make_req(1, 8)])
    except OutOfPagesError as e:
        print(f"{name}：{e}")
    free_after[name] = alloc.num_free_pages
    print(f"    空闲页 3 → {alloc.num_free_pages}，页表第 0 行 {page_table[0, :8].tolist()}")
    try:  # 调度器换个做法：这一步只收请求 1
        alloc.alloc_slots([make_req(1, 8)])
        print("    只收请求 1：分到了")
    except OutOfPagesError as e:
        print(f"    只收请求 1：{e}")
assert free_after == {"一个一个分": 1, "alloc_slots": 3}

# %% [markdown]
# 一个一个分时，请求 0 拿走的 2 页在失败后留在了它的行上，可这一批没被接纳，不会有人为它还页：池子里一个请求都没在跑，只收请求 1 也放不下了。`alloc_slots` 先把整批要的页数加起来，不够就在动手之前报错：

# %% tags=["remove-input"]
listing("minisgl/kvcache/allocator.py", "PageAllocator.alloc_slots")

# %% [markdown]
# 第一遍只检查、只数页，第二遍才拿页、算槽位。一行已有的页和新拿的页都在 CPU 上的 `_rows[row]` 里，槽位由 `pages_to_slots` 按规则直接算出来，接着写最后一页时也不用读设备上的页表；最后 `(行, 位置, 槽位)` 三列一次送上设备、一次写进页表。
#
# ??? note "深入：一行的页和 cached_len 对不上时"
#
#     `assert len(pages) == div_ceil(start, ps)` 要求这一行已有的页正好盖住 `[0, cached_len)`。一个请求结束时忘了 `free_slots` 就把行还给 `TableManager`，下一个拿到这一行的请求从 `cached_len = 0` 开始，这里就会断言失败：泄漏在第一次复用时就暴露，而不是等池子慢慢缩小。同一行在一批里出现两次、区间超出页表宽度，也都是调度器的 bug，用断言拦住。

# %% [markdown]
# ## 释放只看 CPU 上的记录
#
# 请求结束时，`free_slots(row, end)` 放下这一行的页；`start` 可以从某个页边界开始，只还后面的页：

# %% tags=["remove-input"]
listing("minisgl/kvcache/allocator.py", "PageAllocator.free_slots")

# %% [markdown]
# 它不读页表：就算把页表涂成 0，还回来的也是这一行真正用过的页。页表那一行的内容不清除，下一个拿到这一行的请求会覆盖它。

# %%
page_table = torch.full((3, 16), -1, dtype=torch.int32)
alloc = PageAllocator(num_pages=8, page_size=4, page_table=page_table)
alloc.alloc_slots([make_req(0, 6), make_req(1, 9)])  # 0、1 号页；2、3、4 号页
page_table.fill_(0)  # 如果释放去读页表，会以为第 1 行用的是 0 号页
alloc.free_slots(1, 9)
again = alloc.alloc_slots([make_req(2, 12)])
print(f"空闲页 {alloc.num_free_pages} / 8，第 2 行拿到的槽位 {again.tolist()}")
assert again.tolist() == list(range(8, 20))  # 2、3、4 号页，按原来的顺序

# %% [markdown]
# ## 分配和释放都不让 CPU 等 GPU
#
# 在 GPU 上，有两类操作会让 CPU 停下来等：把设备上的数读回 CPU（`.tolist()`、`.item()`），以及从普通（可换页）内存往设备拷贝（`torch.tensor(列表, device="cuda")` 要等同一个流上排在前面的工作和这次拷贝都完成才返回）。分配器两样都不做：记账全是 Python 列表，`free_slots` 只读 `_rows`；`alloc_slots` 送上设备的那 `[3, T]` 个整数先放进[锁页内存](../glossary.md#pinned-memory)，再用 `non_blocking=True` 发起拷贝，写页表是排在同一个流上的一次索引赋值，CPU 都不等。CPU 上什么都不变，张量原样返回：

# %% tags=["remove-input"]
listing("minisgl/utils/misc.py", "to_device")

# %% [markdown]
# 本章的测试里有一个只在有 CUDA 时运行的用例，用 `torch.cuda.set_sync_debug_mode("error")` 让任何同步都抛错，再分配和释放一遍。

# %% [markdown]
# ## 页大小：分配次数和内部碎片的交换
#
# 页越大，decode 时要新页的步数越少，按页读 K/V 的内核每次搬一整块；代价是每个请求最后一页平均空着 `(page_size − 1) / 2` 个槽位。200 个请求一批 prefill（1–600 个 token），再一步步 decode（1–60 步），用真的分配器在四种页大小下各跑一遍：

# %%
rng = random.Random(0)
# 每个请求：(提示长度, decode 步数)
workload = [(rng.randint(1, 600), rng.randint(1, 60)) for _ in range(200)]
total = sum(p + d for p, d in workload)
lines = ["| page_size | 分出去的页 | 分出去的槽位 | 空着的槽位 | 占比 | 每个请求平均空着 |",
         "| ---: | ---: | ---: | ---: | ---: | ---: |"]
waste_per_req = {}
for ps in (1, 4, 16, 64):
    table = torch.zeros(len(workload) + 1, 700, dtype=torch.int32)
    al = PageAllocator(total // ps + len(workload), ps, table)
    batch = [make_req(row, p, output_len=d) for row, (p, d) in enumerate(workload)]
    al.alloc_slots(batch)  # prefill
    while batch := [r for r in batch if r.can_decode]:
        for r in batch:
            r.complete_one()  # 上一步的 token 进了池子，新 token 这一步算
        al.alloc_slots(batch)  # 每个请求 1 个新位置
    slots = al.num_used_pages * ps
    waste_per_req[ps] = (slots - total) / len(workload)
    lines.append(f"| {ps} | {al.num_used_pages:,} | {slots:,} | {slots - total:,} "
                 f"| {(slots - total) / slots:.1%} | {waste_per_req[ps]:.1f} |")
assert waste_per_req[1] == 0 and all(w < ps for ps, w in waste_per_req.items())
print(f"200 个请求，一共 {total:,} 个 token")
Markdown("\n".join(lines))

# %% [markdown]
# 每个请求平均空着的槽位接近 `(page_size − 1) / 2`，和请求长度无关：请求越长，占比越小。`page_size = 16` 时每个请求空着 7.6 个槽位，按 Qwen3-0.6B 的 bf16 不到 1 MiB，远小于按上限预留的浪费。

# %% [markdown]
# ## TableManager：页表的行，和同形状的 token 池
#
# 页表的行也是要分配的资源：同时运行的请求最多 `max_running_reqs` 个，每个占一行，行号就是 `Req.table_idx`。`TableManager` 管这些行，并持有 token 池：

# %% tags=["remove-input"]
listing("minisgl/scheduler/table.py", "TableManager")

# %% [markdown]
# 页表多出来的最后一行不发给请求。token 池和页表同形状，所以拼一批输入时，同一对 `(行, 位置)` 下标既从页表取出 [out_loc](../glossary.md#out-loc)，又从 token 池取出 `input_ids`；上一步采样出的 token 直接写回 token 池，不用先拷回 CPU：

# %%
from minisgl.scheduler.table import TableManager

page_table = torch.zeros(4, 16, dtype=torch.int32)
tm = TableManager(max_running_reqs=3, page_table=page_table)
alloc = PageAllocator(num_pages=8, page_size=4, page_table=page_table)
batch = [make_req(tm.allocate(), n, output_len=2) for n in (5, 8, 3)]
for req in batch:  # 进门：提示写进 token 池
    tm.token_pool[req.table_idx, :req.device_len] = req.input_ids
alloc.alloc_slots(batch)  # prefill 的槽位
rows = torch.tensor([r.table_idx for r in batch])
for step in range(2):
    # 假装这是上一步在设备上采样出的 token
    sampled = torch.tensor([7 + step, 17 + step, 27 + step], dtype=torch.int32)
    tm.token_pool[rows, torch.tensor([r.device_len for r in batch])] = sampled  # 直接写回
    for req in batch:
        req.complete_one()
    out_loc = alloc.alloc_slots(batch)  # 给新位置分槽位
    positions = torch.tensor([r.device_len - 1 for r in batch])
    input_ids = tm.token_pool[rows, positions]  # 同一对下标
    assert torch.equal(page_table[rows, positions], out_loc) and torch.equal(input_ids, sampled)
    print(f"decode {step + 1}：positions={positions.tolist()}  input_ids={input_ids.tolist()}  "
          f"out_loc={out_loc.tolist()}")

# %% [markdown]
# ## 运行
#
# 把本章的 main 跑一遍（输出就是在本章的树里真实跑出来的）：

# %%
run("python examples/ch04_kvcache.py")

# %% [markdown]
# 值得注意的地方：
#
# - 第一节：SmolLM2 一个 token 45.0 KiB（float32），4096 个 token 180.0 MiB；`k_cache(0)` 是池子的视图（`True`）。
# - 第二节：一批三个请求，`需要的新页 [2, 2, 1]`；每个请求的 `out_loc` 就是页表它那一行的前几格，uid 1 的 8 个 token 正好占满 2、3 号页。
# - 第三节：只有 uid 1 的位置 8 在页首，拿到 5 号页（槽位 20）；另外两个接在自己的最后一页里，空闲页 2 / 8，和上面的图一样。
# - 第四、五节：uid 3 拿到的正是刚还回来的第 1 行和 2、3、5 号页；单给 uid 0 够、整批共要 4 页时报错，空闲页仍是 2，页表一个数都没变。

# %% [markdown]
# ## 与上游的差异
#
# - 我们的空闲页是 CPU 上的栈，带引用计数和每行的页；[上游](../glossary.md#upstream)是设备上的一个张量，因为页号不必再拷上设备：`python/minisgl/scheduler/cache.py` · `CacheManager._allocate`。
# - 我们只写 `[cached_len, device_len)` 并返回 `out_loc`；上游一次写整页、`out_loc` 从页表取，因为 decode 到页内位置时不用分配：`python/minisgl/scheduler/cache.py` · `CacheManager.allocate_paged`。
# - 我们一批装不下就报错、什么都不改；上游先从前缀缓存赶走页再 `assert` 够用，因为接纳请求时已按估算长度预留：`python/minisgl/scheduler/prefill.py` · `PrefillAdder._try_allocate_one`。
# - 我们的池子没有页这一维、`store_kv` 用索引赋值；上游存成 `[2, 层, 页, page_size, …]`、调 CUDA 内核 `store_cache`，因为它只在 GPU 上跑：`python/minisgl/kvcache/mha_pool.py` · `MHAKVCache`。
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - KV 池，写入调 CUDA 内核 `store_cache`：`python/minisgl/kvcache/mha_pool.py` · `MHAKVCache`（第 10～68 行），接口在 `python/minisgl/kvcache/base.py` · `BaseKVCachePool`（第 10～37 行）
# - 按模型配置建池：`python/minisgl/kvcache/__init__.py` · `create_kvcache_pool`（第 27～44 行）
# - 池子多一页占位页，页表多一行给占位请求，都在引擎构造时建好：`python/minisgl/engine/engine.py` · `Engine.__init__`（第 30～110 行）
# - 页表的行和 token 池，空闲行用 `pop()` 从最后一行取、不查重复释放：`python/minisgl/scheduler/table.py` · `TableManager`（第 4～21 行）
# - 按页分配、释放，空闲页是设备上一个不计数的张量（前缀缓存的页由 radix 节点的 `ref_count` 保护）：`python/minisgl/scheduler/cache.py` · `CacheManager.allocate_paged`（第 42～53 行）、`python/minisgl/scheduler/cache.py` · `CacheManager._allocate`（第 106～113 行）、`python/minisgl/scheduler/cache.py` · `CacheManager._free`（第 115～117 行）
# - 把一轮里的释放攒到最后一起拼接：`python/minisgl/scheduler/cache.py` · `CacheManager.lazy_free_region`（第 93～104 行）
# - 写页表，下标经锁页内存 `non_blocking` 拷上设备：`python/minisgl/scheduler/cache.py` · `_write_page_table`（第 127～146 行）

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch04_kvcache.py`，不需要模型。每个测试都要能抓住一种错的实现：一个一个分的分配器过不了下面这个回归测试（3 页的池子、两个 8 token 的提示），释放时少还一页过不了随机增删请求的模型检验，释放去读页表过不了“涂掉页表再释放”。

# %% tags=["remove-input"]
listing("tests/test_ch04_kvcache.py", "test_a_batch_that_does_not_fit_changes_nothing")

# %% [markdown]
# 其余测试覆盖池子的形状和视图、`store_kv` 只写 `out_loc` 的那几个槽位、TP 下的本地 KV 头、逐个位置对照页表规则、按页表读回写进去的 K/V（池子事先填满 `nan`）、各种误用被断言拦住、`TableManager` 的行分配。在本章的树里跑全部：

# %%
run("python -m pytest -q --color=no tests/test_ch04_kvcache.py")

# %% [markdown]
# ## 怎么讲清楚
#
# 推理服务不给每个请求预留一块连续的 KV 缓存，而是启动时分好一整块 KV 池，按页发放，用页表记住每个 token 的 K/V 在哪个槽位。三个理由：按上限预留时将近一半空着；连续分配会碎，总量够也放不下；页不必相邻，只在真满时拒绝。代价是每个请求最后一页平均空着 (page_size − 1)/2 个槽位。分配一批时先数页再动手，装不下就什么都不改；记账在 CPU 上，不让 CPU 等 GPU。Qwen3-0.6B 一个 token 112 KiB，1 GiB 只放九千多个 token。

# %% [markdown]
# ## 练习
#
# 1. **预算和并发**。给 Qwen3-0.6B（bf16、TP=1）10 GiB 的 KV 池，`page_size = 16`：能放多少页？64 个请求、每个 2000 个 token，放得下吗？
# 2. **只还后面的页**。`page_size = 4`，一个请求有 14 个 token，想留下前面完整的页、只还其余的，`free_slots` 怎么调？为什么位置 12、13 那一页不能留给别的请求共享？
# 3. **哪里会同步**。把 `alloc_slots` 里的 `to_device(host, torch.int32, self.device)` 改成 `torch.tensor(host.tolist(), device=self.device)`，CPU 上结果一样。在 GPU 上有什么不同？
# 4. **挑战：一次写整页**。上游分配一页时就把这页全部 `page_size` 个位置写进页表。改成这样，`alloc_slots` 里哪些计算可以省掉？页表里“还没走到的位置”有了槽位，会不会让读页表的地方出错？
#
# ??? success "参考答案"
#
#     1. 每页 16 × 112 KiB = 1,792 KiB，10 GiB 能放 5,851 页。每个请求要 `ceil(2000 / 16) = 125` 页，64 个共 8,000 页，放不下，最多 46 个。
#     2. `free_slots(row, 14, start=12)`，前 3 页留下。位置 12、13 那一页只用了一半：共享它的请求从位置 14 起会往剩下的空位里写，而别人也在读这一页，所以共享只按整页来，`alloc_slots` 也断言不往别人持有的页里写。
#     3. `host.tolist()` 在 CPU 上没事；`torch.tensor(..., device="cuda")` 从可换页内存拷贝，要等流上排在前面的工作和这次拷贝都完成才返回，每一步都让 CPU 等一次 GPU。锁页内存加 `non_blocking=True` 时，CPU 发起拷贝就返回。
#     4. 页内位置不再需要算槽位：`out_loc` 直接是 `page_table[行, 位置]`，只有拿到新页时才写页表，写的是整页。注意力后端只读 `[0, device_len)`，多写的格子不会被当成有效数据读到。
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
# - 按上限预留将近一半空着，连续分配总量够也放不下；KV 池一次分好、按页发放、页不必相邻。
# - 池子是一块 `[2, 层数, 槽位数, 本地 KV 头, head_dim]` 的缓冲区，每层一个视图；一个 token 的 K/V 是 `2 × 层数 × 本地 KV 头 × head_dim × 字节数`。
# - 页表存槽位：`页号 × page_size + pos % page_size`；分配器在 CPU 上记空闲页、每页的引用计数和每行的页。
# - 一批请求要么全分到，要么什么都不改；释放只看 CPU 上的记录；在 GPU 上两者都不让 CPU 等。
# - token 池和页表同形状，同一对 `(行, 位置)` 下标取出 `input_ids` 和 `out_loc`。
