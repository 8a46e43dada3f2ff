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
# # 第 5 章 注意力后端
#
# 到第 4 章为止，模型的每一层都只和“一个 token”打交道：线性层、RMSNorm、RoPE、MLP 都是逐 token 的，一批请求的 token 首尾相接成 `[T, hidden]` 往下传，谁属于哪个请求它们一概不管。只有注意力例外：一个 token 要和**它自己那个请求**之前的所有 token 交互，这些 token 的 K/V 大部分不在这一步的输入里，而是散落在 KV 池的各个页上；每个请求缓存了多长、这一步送进来几个、该看见哪些 key，全都不一样。第 2 章的 `AttentionLayer` 把 q、k、v 算好之后，就把这摊事整个交给了“注意力后端”。本章写出它的接口和一个在 CPU 上跑得动的参考实现：先把新 K/V 存进池子，再按页表把每个请求的 K/V 取回来，交给 torch 的 `scaled_dot_product_attention`（SDPA）。它要做对三件容易做错的事——变长的批次、右下对齐的因果掩码、decode 补齐时不去碰没写过的内存——做对之后，tiny Qwen3 经由它生成的 token 与 Hugging Face 逐个相同。

# %% tags=["remove-cell"]
from minibook.page import *
_ = setup(5)  # 赋值而不显示：返回的树路径随机器而变

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 注意力后端为什么拆成 `prepare_metadata(batch)` 和 `forward(q, k, v, layer_id, batch)` 两个方法？一个 28 层的模型跑一步，它们各被调用几次？
# 2. 一个请求缓存了 4 个 token，这一步送进来 3 个（共 7 个 key）。直接用 SDPA 的 `is_causal=True`，第 0 个 query 能看见哪些 key？它应该看见哪些？decode（1 个 query）用 `is_causal=True` 又会怎样？
# 3. `forward` 为什么要先把这一步的 K/V 写进 KV 池，再去池子里取 K/V？
# 4. 一批 decode 请求的 key 数是 `[7, 10, 4]`，补齐成 10 列一次算完。补出来的列读哪个槽位？反正有 `key_mask` 遮着，随便指向槽位 0 为什么不行？
# 5. Qwen3-0.6B 有 16 个 query 头、8 个 KV 头。query 头 5 用哪个 KV 头？把 `repeat_interleave` 换成 `repeat` 会怎样？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 元数据（每个请求几个 query、几个 key、`cu_seqlens`、每个 key 在池里的槽位）只取决于批次，对所有层都一样，所以每批算一次；`forward` 要用到这一层的 q/k/v 和这一层的 KV 池，每层一次。28 层的模型一步：`prepare_metadata` 1 次，`forward` 28 次。拆开还有两层用意：第 11 章的重叠调度在 GPU 算上一批时，就在 CPU 上为下一批准备好元数据；第 18 章图捕获重放时，前向里不能再跑 Python，元数据必须事先备好。
#     2. `is_causal=True` 的掩码是左上对齐的 `tril`：第 0 个 query 只看见 key 0。它在序列里的位置是 4，应该看见 key 0…4。decode 时掩码是 1×n 的左上三角，唯一的 query 只看见 key 0——而它本该看见全部 n 个。只有 query 数等于 key 数（没有缓存前缀）时两者才一样。
#     3. 这一步的新 token 也是 key：第 i 个新 token 要看见自己和它之前的新 token。先存后取，取回来的 K/V 就是“缓存的前缀 + 这一步的”完整一段；先取后存，新 token 的槽位里还是旧数据（或没初始化的内存）。
#     4. 读这个请求最后一个真实 key 的槽位（这一步刚写过）。KV 池是 `torch.empty` 分配的，没写过的槽位里可能是 NaN 或 Inf；SDPA 的布尔掩码是给分数加 `-inf`，`NaN + (-inf)` 还是 NaN，权重为 0 的位置还要乘 V，`0 × NaN` 也是 NaN。掩码只能把有限的数变成 0 权重，挡不住 NaN。
#     5. 每 2 个相邻的 query 头共用一个 KV 头：query 头 5 用 KV 头 `5 // 2 = 2`。`repeat` 得到 `[0…7, 0…7]`，query 头 5 会配上 KV 头 5，和 Hugging Face 的 `repeat_kv`、和权重的排布都对不上；结果不报错，只是错。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章新建 `minisgl/attention/` 包：`base.py` 是接口，`sdpa.py` 是参考后端，`__init__.py` 按名字创建后端。它站在两章之上：第 2 章 `layers/attention.py` 的 `AttentionLayer` 调用它，第 4 章的 `kvcache/`（KV 池和页分配器）给它存 K/V 的地方。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch05_attention.py`，分三节。第一节用固定种子的随机 q/k/v 走一遍后端：三个请求一起 prefill，其中一个命中了 5 个 token 的前缀缓存；打印元数据、这个请求右下对齐和左上对齐的两张掩码，与逐个 query 循环的朴素注意力对照，再看看换成 `is_causal=True` 错多少。第二节接着 decode 两步，看 `key_mask` 怎样遮掉补齐的 key。第三节换上真模型：tiny Qwen3 经由这个后端 prefill 三个长短不一的提示、再 decode 五步，贪心结果与 Hugging Face 逐 token 对照。它只用到上面这棵树里的文件；`python tools/steps.py check` 会逐章搭出这棵树、跑这个 main 和树里的全部测试。只想跑这一个 main：
#
# ```bash
# python tools/steps.py run 5 -- python examples/ch05_attention.py
# ```
#
# 第一、二节的 KV 池先用 NaN 填满：任何一次读到没写过的槽位，结果里就会冒出 NaN。main 里“调度器”的活只有几行——给这一步的 token 分配槽位、填好 `Batch`、调一次 `prepare_metadata`；第 7 章会把它写进真正的调度器：

# %% tags=["remove-input"]
listing("examples/ch05_attention.py", "prepare_batch")

# %% [markdown]
# ## 一张图：一批请求怎样穿过注意力后端
#
# ![上半：三个请求的 q 首尾相接，cu_seqlens_q 标出边界；kv_indices 是从页表里取出的每个 key 的槽位，补齐部分重复最后一个槽位。下半：forward 先把新 K/V 写到 out_loc，再按 kv_indices 取回每个请求的 K/V，逐个请求做 SDPA，拼回原顺序](../assets/ch05_paged_flow.svg)
#
# 图里就是 main 第一节的那一批，page_size = 4。读的顺序：
#
# - **q 的行**：这一步三个请求共 13 个新 token，按请求顺序首尾相接。格里的数是 positions——请求 1 命中了 5 个 token 的缓存，所以它的 4 个新 token 位置是 5…8。`cu_seqlens_q = [0, 6, 10, 13]` 标出每个请求在 q 里的起止。
# - **kv_indices**：每个请求**全部** key（缓存的前缀 + 这一步的）在 KV 池里的槽位，直接从页表那一行抄出来，补齐到同样的列数。绿色是请求 1 缓存的前缀，它们在更早的某次前向里就写进了池子（槽位 0…4）；橙色是这一步的 token，槽位就是 `batch.out_loc`。
# - **KV 池**：一层的池子，24 个槽位、6 页。请求 1 的第 4 个 token 在页 1 的开头，于是这一步的位置 5、6、7 接着写进页 1 的剩余槽位，位置 8 才开新的一页（页 4）。同一个请求的 K/V 在池里不连续，这正是页表存在的理由。
# - **forward**：每一层先把新 K/V 写到 `out_loc`，再按 `kv_indices` 把每个请求的 K/V 取成连续的一段，一个请求一次 SDPA，结果按 q 的顺序拼回 `[13, hq, d]`。
#
# 第二张图是本章的两个“容易错”：

# %% [markdown]
# ![上：缓存 5 个、这一步 4 个 query 的请求，右下对齐的掩码与 is_causal=True 的左上对齐掩码，红格是本该看见却被遮掉的 key。下：decode 一步，三个请求补齐到 10 个 key，补齐的格子重复最后一个真实槽位](../assets/ch05_masks.svg)
#
# 下面一节一节地看。

# %% [markdown]
# ## 接口：一批准备一次，一层算一次
#
# 先看是谁在调用后端。第 2 章的 `AttentionLayer.forward` 切好 q、k、v，做完 Qwen3 的 q/k 归一化和 RoPE，最后一行交给后端：

# %% tags=["remove-input"]
listing("minisgl/layers/attention.py", "AttentionLayer.forward")

# %% [markdown]
# 层手里只有三样东西：这一层的 q/k/v、自己的层号、以及从全局上下文里拿到的当前批次。它不知道 KV 池长什么样、页有多大、批里有几个请求。后端的接口就两个方法：

# %% tags=["remove-input"]
listing("minisgl/attention/base.py", "BaseAttnBackend")

# %% [markdown]
# 一步前向里两者的调用次数差一个层数的倍数：
#
# | 方法 | 谁调用 | 一步调几次（Qwen3-0.6B） | 做什么 |
# | --- | --- | --- | --- |
# | `prepare_metadata(batch)` | 调度器（本章是 main 里的 `prepare_batch`），前向之前 | 1 | 把批次整理成表：每个请求几个 query、几个 key、`cu_seqlens`、每个 key 的槽位 |
# | `forward(q, k, v, layer_id, batch)` | 每个 `AttentionLayer` | 28 | 存这一层的新 K/V，取 K/V，算注意力 |
#
# 为什么要拆成两步，而不是在 `forward` 里顺手把元数据算了？
#
# 1. **元数据对所有层都一样。** 谁缓存了多长、谁在页表的哪一行，只取决于批次，与层无关。算它要在 Python 里遍历请求、建几个小张量，在 GPU 上还要从 CPU 拷过去；放进 `forward` 就是每步重复 28 次。
# 2. **它可以提前做。** 第 11 章的重叠调度让 CPU 和 GPU 同时干活：GPU 在算第 k 批时，CPU 已经在为第 k+1 批分配槽位、准备元数据。这要求元数据的准备与前向本身分开，前向里只剩 GPU 上的张量运算，不再停下来等 CPU。
# 3. **图重放时前向里不能有 Python。** 第 18 章把 decode 的前向录成一张图反复重放，图里的张量地址是固定的；元数据必须在重放之前写进那几块固定的缓冲区。上游 mini-sglang 的接口为此专门多了 `prepare_for_capture` / `prepare_for_replay`。
# 4. **快的内核本身就是这么分的。** FlashInfer 的批量注意力要先 `plan`（在 CPU 上根据各请求长度划分工作），再对每一层 `run`；`plan` 天然属于 `prepare_metadata`，`run` 属于 `forward`。
#
# 元数据放在 `batch.attn_metadata` 上，跟着批次走，而不是存在后端对象里：重叠调度时同一时刻有两批“活着”（一批在算、一批在准备），各带各的元数据，互不覆盖。基类 `BaseAttnMetadata` 是个空的 dataclass，每个后端在它上面加自己需要的字段；按名字创建后端的工厂在 `__init__.py` 里：

# %% tags=["remove-input"]
listing("minisgl/attention/__init__.py", "create_attention_backend")

# %% [markdown]
# 本章只有 `"torch"` 一个名字，第 6 章的 `EngineConfig(attention_backend="torch")` 就从这里选；第 17 章往 `BACKENDS` 里加更快的后端，模型代码一行都不用改。
#
# ## 变长批次：cu_seqlens 和 kv_indices
#
# “变长”（varlen）说的是一批里各请求的 query 数、key 数都不一样，而且**不补齐**：q 就是 `[T, hq, d]`，T 是这一步所有请求新 token 数之和。这是整个模型的默认排布——既然除了注意力以外每一层都逐 token 计算，补齐只会让它们白算补出来的行。prefill 批里一个提示 3 个 token、另一个 2000 个，补齐就是 3 的那个也要算 2000 行。代价是注意力得自己知道边界在哪，`prepare_metadata` 把这些写成一张表：

# %% tags=["remove-input"]
listing("minisgl/attention/sdpa.py", "SDPAAttnMetadata")

# %% tags=["remove-input"]
listing("minisgl/attention/sdpa.py", "SDPAAttnBackend.prepare_metadata")

# %% [markdown]
# - `seq_lens_q[i]` 是请求 i 这一步的 query 数，就是第 1 章的 `extend_len`；`seq_lens_k[i]` 是它能看见的 key 数，`device_len`——缓存的前缀加上这一步的。
# - `cu_seqlens_q` 是 `seq_lens_q` 的前缀和，前面补一个 0：请求 i 的 query 是 `q[cu[i]:cu[i+1]]`。这个名字和用法来自 FlashAttention 的变长接口（`flash_attn_varlen_func` 要的就是 `cu_seqlens_q`、`cu_seqlens_k`、`max_seqlen_q`、`max_seqlen_k`），第 17 章的后端把它原样交给内核。
# - `kv_indices[i, j]` 是请求 i 第 j 个 key 的槽位，一次高级索引从页表里取出 `[B, max_k]`。每个请求取到 `device_len` 为止；页表那一行后面的列可能是别的东西（上一个用这一行的请求留下的旧槽位，或者测试故意填的 -1），所以用 `clamped` 把列号夹到 `device_len - 1`，根本不去读它们。
# - `key_mask[i, j]` 为真表示这是真实的 key，假表示补齐；`single_query` 记下“每个请求都恰好 1 个 query”，`forward` 据此选路径（下文）。
# - `causal_masks[i]` 是请求 i 的右下对齐因果掩码（下文细讲），只在逐请求的路径上用。它只取决于长度，所有层都一样，所以和其他字段一样在这里做一次，不在每层的 `forward` 里重做。
#
# 在本章的树里把图上那一批真的搭出来看看：

# %%
import math

import torch
import torch.nn.functional as F

from minisgl.attention import causal_mask_bottom_right, create_attention_backend
from minisgl.core import Batch, Req, SamplingParams
from minisgl.kvcache import MHAKVCachePool, PageAllocator

HQ, HKV, D, LAYERS, PAGE = 4, 2, 16, 2, 4
gen = torch.Generator().manual_seed(0)


def randn(*shape):
    return torch.randn(*shape, generator=gen)


def make_req(uid, prompt_len, cached_len=0):
    return Req(input_ids=torch.arange(prompt_len, dtype=torch.int32), table_idx=uid,
               cached_len=cached_len, output_len=8, uid=uid,
               sampling_params=SamplingParams(max_tokens=8), cache_handle=None)


def make_batch(reqs, phase):
    """调度器的活：分配这一步的槽位、填好 Batch、准备元数据。"""
    batch = Batch(reqs=reqs, phase=phase)
    batch.padded_reqs = reqs
    batch.out_loc = torch.cat([
        alloc.alloc_slots(page_table, r.table_idx, r.cached_len, r.device_len) for r in reqs])
    backend.prepare_metadata(batch)
    return batch


pool = MHAKVCachePool(HKV, LAYERS, D, num_pages=16, page_size=PAGE, dtype=torch.float32,
                      device="cpu")
pool.kv_buffer.fill_(float("nan"))  # 没写过的槽位是 NaN：谁读到了，结果里就有 NaN
page_table = torch.full((4, 32), -1, dtype=torch.int32)  # -1 也是陷阱：负下标会从末尾取
alloc = PageAllocator(16, PAGE, "cpu")
backend = create_attention_backend("torch", pool, page_table)

reqs = [make_req(0, 6), make_req(1, 9, cached_len=5), make_req(2, 3)]
# 请求 1 的前缀：更早的某次前向就写进了池子
prefix_loc = alloc.alloc_slots(page_table, 1, 0, 5)
for layer in range(LAYERS):
    pool.store_kv(randn(5, HKV, D), randn(5, HKV, D), prefix_loc, layer)

batch = make_batch(reqs, "prefill")
meta = batch.attn_metadata
print("seq_lens_q   =", meta.seq_lens_q, "  seq_lens_k =", meta.seq_lens_k)
print("cu_seqlens_q =", meta.cu_seqlens_q.tolist(), "  single_query =", meta.single_query)
print("out_loc      =", batch.out_loc.tolist())
print("kv_indices   =")
for row in meta.kv_indices.tolist():
    print("   ", row)
assert meta.cu_seqlens_q.tolist() == [0, 6, 10, 13]
assert meta.kv_indices.tolist() == [[8, 9, 10, 11, 12, 13, 13, 13, 13],
                                    [0, 1, 2, 3, 4, 5, 6, 7, 16],
                                    [20, 21, 22, 22, 22, 22, 22, 22, 22]]

# %% [markdown]
# 与图上一格不差。请求 0 和 2 的行尾重复着各自最后一个槽位（13、22）：prefill 的路径只用每行的前 `seq_lens_k[i]` 个，这些补齐的列要到 decode 才派上用场。注意 `kv_indices` 里存的是**槽位**而不是页号：第 4 章的页表按 token 记槽位，不管 page_size 是 1 还是 16，“请求 i 的第 j 个 key 在哪”都是一次查表，后端不需要知道页有多大。
#
# ## 先存，后算
#
# `forward` 的第一件事是把这一步的 K/V 写进这一层的池子，之后才去池子里取：

# %% tags=["remove-input"]
listing("minisgl/attention/sdpa.py", "SDPAAttnBackend.forward")

# %% [markdown]
# 顺序不能反，因为这一步的新 token 同时也是 key：请求 1 的第 3 个新 token（位置 7）要看见位置 0…7，其中 5、6、7 就是这一步刚算出来的。先存后取，`kv_indices` 指向的每个槽位都是有效的；请求 2 没有任何缓存，它的 key **全部**来自这一步。把两步的顺序颠倒过来试试——直接调内部的 `_forward_per_request`，跳过存储：

# %%
q, k, v = randn(13, HQ, D), randn(13, HKV, D), randn(13, HKV, D)
# 没存就算：直接调内部的逐请求路径
attend_first = backend._forward_per_request(q, pool.k_cache(0), pool.v_cache(0), meta)
out = backend.forward(q, k, v, 0, batch)  # 正常顺序：先存后算
for name, o in (("先算后存", attend_first), ("先存后算", out)):
    cu = meta.cu_seqlens_q.tolist()
    nan_rows = [i for i in range(len(reqs)) if o[cu[i]:cu[i + 1]].isnan().any()]
    print(f"{name}：输出里有 NaN 的请求 {nan_rows}")
assert torch.equal(pool.k_cache(0)[batch.out_loc], k) and not out.isnan().any()
assert attend_first.isnan().any()
assert pool.k_cache(1)[batch.out_loc].isnan().all()  # 只写了第 0 层：第 1 层的这些槽位还是 NaN

# %% [markdown]
# 三个请求全都读到了 NaN——包括请求 1：它的前缀是好的，可它的新 token 还没写进去。在真正的引擎里池子不会是 NaN 而是上一个请求留下的旧数，结果就不是 NaN，而是**悄悄错掉**的数字。
#
# 另外两个细节：`store_kv` 写的是 `layer_id` 那一层（最后一行断言：第 1 层的这些槽位还是 NaN），每层各存各的；写进池子的是 RoPE **之后**的 k——位置信息已经旋进了 K 里，之后的 decode 直接拿来用，不用再按位置旋转一遍。`forward` 开头那个 token 数的检查也值得留着：`prepare_metadata` 之后批次如果被改过（比如多塞了一个请求），元数据和 q 就对不上了，这里报错比算出一串错位的结果好查得多。
#
# ## 因果掩码要右下对齐
#
# 第 0 章已经见过这件事，这里在变长批次里把它说透。请求有 `n_k` 个 key、这一步有 `n_q` 个 query 时，这 `n_q` 个 query 是序列的**最后** `n_q` 个 token：第 i 个 query 的位置是 `n_k - n_q + i`，它能看见位置 0…`n_k - n_q + i` 的 key。画成 `n_q × n_k` 的矩阵，可见区域是一个贴着**右下角**的三角：

# %% tags=["remove-input"]
listing("minisgl/attention/sdpa.py", "causal_mask_bottom_right")

# %% [markdown]
# SDPA 的 `is_causal=True` 用的却是 `torch.ones(n_q, n_k).tril()`：第 i 个 query 看见 key 0…i，三角贴着**左上角**（PyTorch 文档写明了它是 “upper left causal bias”）。两者只在 `n_q == n_k` 时重合。下面是缓存 4 个、这一步 3 个的请求（3 个 query、7 个 key），与最直白的逐 query 循环对照：

# %%
def naive_attention(q, k, v, q_positions):
    """朴素注意力（float64）：位置 p 的 query 看位置 0..p 的 key；q 头 h 用 KV 头 h // group。"""
    q, k, v = q.double(), k.double(), v.double()
    group = q.shape[1] // k.shape[1]
    out = torch.zeros_like(q)
    for i, p in enumerate(q_positions):
        for h in range(q.shape[1]):
            w = torch.softmax(k[: p + 1, h // group] @ q[i, h] / math.sqrt(q.shape[2]), dim=0)
            out[i, h] = w @ v[: p + 1, h // group]
    return out


nq, nk = 3, 7
bottom_right = causal_mask_bottom_right(nq, nk)
top_left = torch.ones(nq, nk, dtype=torch.bool).tril()  # is_causal=True 用的就是它
print("query 位置   右下对齐（正确）    左上对齐（is_causal=True）")
for i in range(nq):
    row = lambda m: " ".join(str(int(x)) for x in m[i])
    print(f"     {nk - nq + i}      {row(bottom_right)}     {row(top_left)}")

q3, k7, v7 = randn(nq, HQ, D), randn(nk, HKV, D), randn(nk, HKV, D)
ref = naive_attention(q3, k7, v7, q_positions=[4, 5, 6])
# SDPA 要 [batch, 头, 序列, d]；GQA 先把 KV 头复制到与 q 头一一对应
qs = q3.transpose(0, 1)[None]
ks = k7.repeat_interleave(HQ // HKV, dim=1).transpose(0, 1)[None]
vs = v7.repeat_interleave(HQ // HKV, dim=1).transpose(0, 1)[None]
ours = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=bottom_right, scale=D ** -0.5)
wrong = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True, scale=D ** -0.5)
err_ours = (ours[0].transpose(0, 1).double() - ref).abs().max().item()
err_wrong = (wrong[0].transpose(0, 1).double() - ref).abs().max().item()
print(f"右下对齐的掩码与朴素注意力的最大误差 < 1e-5：{err_ours < 1e-5}")
print(f"is_causal=True 与朴素注意力的最大误差：{err_wrong:.2f}")
assert err_ours < 1e-5 and err_wrong > 0.1

# %% [markdown]
# 左上对齐时位置 4 的 query 只看见 key 0，位置 6 的只看见 0…2——不报错、形状全对，数值错得一塌糊涂。什么时候 `n_q ≠ n_k`？这正是推理引擎的日常：
#
# | 场景 | n_q | n_k | `is_causal=True` 对吗 |
# | --- | --- | --- | --- |
# | 没有缓存的 prefill | 提示长 | 提示长 | 对（两个三角重合） |
# | 命中前缀缓存的 prefill（第 8、9 章） | 未命中的部分 | 整个提示 | 错 |
# | 分块 prefill 的后几块（第 10 章） | 这一块 | 之前的块 + 这一块 | 错 |
# | decode | 1 | 整段历史 | 错：唯一的 query 只看见 key 0 |
#
# 所以只在“没有缓存”时才测 prefill 的实现，这个 bug 能一直藏到接上前缀缓存那天。PyTorch 其实也提供了右下对齐的版本，`torch.nn.attention.bias.causal_lower_right(n_q, n_k)`，可以直接当 `attn_mask` 传给 SDPA，结果与我们的掩码一致：

# %%
from torch.nn.attention.bias import causal_lower_right

same = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=causal_lower_right(nq, nk),
                                      scale=D ** -0.5)
assert torch.allclose(same, ours, atol=1e-6)
print("causal_lower_right 与 causal_mask_bottom_right 结果一致")

# %% [markdown]
# 我们仍然自己写这三行：它把“按绝对位置比较”这条规则摆在明处，第 17 章换成别的内核时，你知道该去检查它的 causal 是哪种对齐。FlashAttention 从 2.1 版起，`causal=True` 在 `seqlen_q ≠ seqlen_k` 时就是右下对齐（此前是左上对齐）；FlashInfer 的 `causal=True` 同样按“query 是最后几个 token”来对齐。
#
# ## prefill：每个请求一次 SDPA
#
# 只要批里有一个请求不止 1 个 query，`forward` 就走逐个请求的路径：

# %% tags=["remove-input"]
listing("minisgl/attention/sdpa.py", "SDPAAttnBackend._forward_per_request")

# %% [markdown]
# 每个请求：用 `cu_seqlens_q` 的那一段切出自己的 q，按 `kv_indices[i, :num_k]` 用 `index_select` 把自己的 K/V 从池里取成连续的 `[num_k, hkv, d]`（这是一次**拷贝**，下文讲代价；`index_select` 按一维下标取行，在 CPU 上比拿 int32 张量做高级索引快好几倍），换成 SDPA 要的 `[1, 头, 序列, d]`，配上这个请求的右下对齐掩码。最后按原顺序 `torch.cat` 回 `[T, hq, d]`——输出的第 t 行必须仍然对应 q 的第 t 行，后面的 `o_proj` 和残差都按这个顺序走。
#
# 真正调用 SDPA 的地方只有一处，GQA 和缩放都在这里：

# %% tags=["remove-input"]
listing("minisgl/attention/sdpa.py", "SDPAAttnBackend._sdpa")

# %% [markdown]
# 缩放 `head_dim ** -0.5` 显式传进去，虽然它和 SDPA 的默认值相同：有的模型用别的缩放（Gemma 2 按 config 里的 `query_pre_attn_scalar` 算，DeepSeek 的 MLA 在 YaRN 扩展上下文时还要再乘一个修正系数），写明了就不会在换模型时悄悄沿用一个错的默认值。上游的接口为此留了 `softmax_scale` 参数。
#
# ### GQA：repeat_interleave，与 HF 的 repeat_kv 相同

# %% tags=["remove-input"]
listing("minisgl/attention/sdpa.py", "repeat_kv_heads")

# %% [markdown]
# 池里只存 KV 头（这是 GQA 省显存的全部意义），算的时候才把每个 KV 头复制 `group` 份，排成和 q 头一一对应。复制方式决定了“哪些 q 头共用一个 KV 头”，它必须与模型训练时的约定一致。拿 Qwen3-0.6B 的头数，和 Hugging Face 的 `repeat_kv` 逐元素比一下：

# %%
from transformers.models.llama.modeling_llama import repeat_kv as hf_repeat_kv

from minisgl.attention.sdpa import repeat_kv_heads

x = randn(1, 8, 5, 4)  # [batch, 8 个 KV 头, 序列, d]
ours16 = repeat_kv_heads(x, num_q_heads=16)
assert torch.equal(ours16, hf_repeat_kv(x, 2))


def which_kv(y):
    """y 的每个 q 头是 x 的哪个 KV 头。"""
    return [next(j for j in range(8) if torch.equal(y[0, h], x[0, j])) for h in range(16)]


kv_of_q = which_kv(ours16)
kv_of_q_wrong = which_kv(x.repeat(1, 2, 1, 1))  # 一个常见的错：repeat 而不是 repeat_interleave
print("repeat_interleave：q 头 0..15 用的 KV 头", kv_of_q)
print("repeat（错）      ：q 头 0..15 用的 KV 头", kv_of_q_wrong)
assert kv_of_q == [h // 2 for h in range(16)]

# %% [markdown]
# 这个分组关系还决定了第 16 章张量并行怎么切：相邻的 q 头和它们共用的 KV 头落在同一个 rank 上，注意力本身就不需要通信。
#
# ## decode：补齐成一批，一次算完
#
# decode 时每个请求只有 1 个 query——序列的最后一个 token。它应当看见这个请求的全部 key，所以**不需要因果掩码**；各请求之间唯一的不同是 key 数。于是把 K/V 补齐成 `[B, max_k]`，用 `key_mask` 遮掉补出来的列，整批一次 SDPA：

# %% tags=["remove-input"]
listing("minisgl/attention/sdpa.py", "SDPAAttnBackend._forward_single_query")

# %% [markdown]
# 形状一路是：q `[B, hq, d]` → `[B, hq, 1, d]`；K/V 按 `kv_indices` 取出 `[B, max_k, hkv, d]` → `[B, hkv, max_k, d]`；掩码 `[B, 1, 1, max_k]` 广播到每个头、那一个 query。走哪条路径由 `single_query` 决定，而它看的是**形状**——`all(n == 1 for n in seq_lens_q)`——不是 `batch.phase`。一个 prefill 批如果每个请求都只剩最后 1 个 token 要算（前缀缓存命中了 `len - 1` 个），它也走这条批量路径，结果一样对；反过来，路径判断不依赖调度器有没有把 phase 标对。
#
# 接着上面那一批 decode 一步，看看补齐后的表：

# %%
for r in reqs:
    r.complete_one()
dbatch = make_batch(reqs, "decode")
dmeta = dbatch.attn_metadata
print("seq_lens_k =", dmeta.seq_lens_k, "  single_query =", dmeta.single_query)
print("kv_indices（· 后面是补齐的列）：")
for row, n in zip(dmeta.kv_indices.tolist(), dmeta.seq_lens_k):
    print("   ", " ".join(f"{s:2d}" for s in row[:n]), "·", " ".join(f"{s:2d}" for s in row[n:]))
print("key_mask：")
for row in dmeta.key_mask.int().tolist():
    print("   ", " ".join(map(str, row)))
assert dmeta.single_query and dmeta.kv_indices.shape == (3, 10)
assert dmeta.kv_indices[0, 7:].tolist() == [14] * 3  # 重复请求 0 最后一个槽位
assert dmeta.kv_indices[2, 4:].tolist() == [23] * 6

# %% [markdown]
# ### 补齐为什么要指向写过的槽位
#
# 补出来的列反正会被 `key_mask` 遮掉，指向哪里似乎无所谓——指向槽位 0，或者直接拿页表那一行后面的列，都更省事。可 KV 池是 `torch.empty` 分配的（第 4 章：几 GB 的池子清零一遍要时间，正确的代码也只读写过的槽位）。没写过的内存里是什么都有可能：GPU 的缓存分配器把别的张量用过的显存交给你，旧数据按 bf16 或 float32 解释，只要指数位全是 1 就是 Inf 或 NaN——一个随机的位模式有 1/256 的机会落在这里，一列补齐就有上千个元素。
#
# 而掩码挡不住 NaN。SDPA 的布尔掩码是给分数**加上** `-inf`：`NaN + (-inf)` 仍是 NaN，softmax 之后这一行全变成 NaN；就算分数侧用 `masked_fill` 把 NaN 换成了 `-inf`，权重为 0 的列还要乘 V，`0 × NaN` 还是 NaN。一个 Inf 也一样：`Inf + (-inf)` 是 NaN。所以补齐的列必须读**有限的数**，`prepare_metadata` 选了最稳妥的那个：这个请求最后一个真实 key 的槽位，这一步刚写过。下面把补齐的列改成一个从没写过的槽位（池子里是 NaN），其余不变：

# %%
print("NaN + (-inf) =", (torch.tensor(float("nan")) + float("-inf")).item(),
      "   0 × NaN =", (0 * torch.tensor(float("nan"))).item())
q1, k1, v1 = randn(3, HQ, D), randn(3, HKV, D), randn(3, HKV, D)
good = backend.forward(q1, k1, v1, 0, dbatch)

never_written = 63  # 最后一页的最后一个槽位，从没分配过
assert pool.k_cache(0)[never_written].isnan().all()
bad_indices = torch.where(dmeta.key_mask, dmeta.kv_indices, never_written)
dbatch.attn_metadata = type(dmeta)(**{**vars(dmeta), "kv_indices": bad_indices})
bad = backend.forward(q1, k1, v1, 0, dbatch)
dbatch.attn_metadata = dmeta
verdict = lambda o: "NaN" if o.isnan().any() else "正常"
for i, n in enumerate(dmeta.seq_lens_k):
    print(f"请求 {i}（补 {10 - n} 列）：指向最后一个槽位 → {verdict(good[i])}，"
          f"指向没写过的槽位 → {verdict(bad[i])}")
assert not good.isnan().any()
assert bad[0].isnan().all() and bad[2].isnan().all() and not bad[1].isnan().any()

# %% [markdown]
# 请求 1 的 key 数就是 `max_k`，它没有补齐的列，不受影响；另外两个请求整行 NaN，尽管掩码一格不差。练习 017 里补齐的位置被塞进“很大的随机数”，掩码足以挡住它们；换成 NaN 就不行了——这是那道题没考、真实引擎必须处理的一步。本章的测试和 main 都把池子先填满 NaN，就是为了让“读到没写过的槽位”这类错误当场暴露，而不是变成一个偶尔出现的乱码。

# %% [markdown]
# ## 代价：CPU 上慢在哪，第 17 章换掉什么
#
# 这个后端追求一眼看得出是对的，不追求快。它慢在三处：
#
# 1. **逐个请求的循环。** prefill（和任何混有多 query 请求的批）每层每个请求一次 SDPA：32 个请求、28 层就是 896 次小调用，每次都有 Python 和算子派发的固定开销，请求越短越不划算。
# 2. **gather 是拷贝。** `index_select` 把散落在各页的 K/V 拷成一段连续的张量，GQA 的 `repeat_interleave` 再拷一份 `group` 倍大的。注意力本来只需要把每个 key 读一遍，这里先读、再写、再读。
# 3. **补齐白算。** decode 批按最长的请求补齐：31 个 16 个 token 的请求和 1 个 4000 个 token 的请求拼在一起，要算 32 × 4000 = 128000 个分数，真正有用的只有 4496 个。
#
# 第二条的量级可以只从 config 算出来。Qwen3-0.6B（28 层、8 个 KV 头、head_dim 128），bf16 存储，一个请求 decode 一步：

# %%
from minibook.models import qwen3_06b_config

from minisgl.models import ModelConfig

cfg = ModelConfig.from_json(qwen3_06b_config())
group = cfg.num_qo_heads // cfg.num_kv_heads
# 层数 × (K, V) × KV 头 × head_dim × 2 字节（bf16）
per_token = cfg.num_layers * 2 * cfg.num_kv_heads * cfg.head_dim * 2
print(f"每个 token 的 K/V（{cfg.num_layers} 层，bf16）：{per_token // 1024} KiB；GQA 组大小 {group}")
print(f"{'上下文':>8} {'要读的 K/V':>12} {'gather 拷一份':>14} {'repeat 再拷':>12}")
for ctx_len in (1024, 4096, 32768):
    kv = per_token * ctx_len / 2**20
    print(f"{ctx_len:>8} {kv:>10.0f} MiB {kv:>11.0f} MiB {kv * group:>9.0f} MiB")
assert per_token == 112 * 1024

# %% [markdown]
# 一个 4k 上下文的请求每步要读 448 MiB 的 K/V，这是注意力绕不开的；参考后端在此之外还要写出 448 MiB 的 gather 副本和 896 MiB 的 GQA 副本，再把它们读回来——decode 是带宽受限的，多出来的这几份读写几乎直接变成多出来的时间。
#
# 第一条在 CPU 上也看得见：同一批 32 个 decode 请求，逐个请求调 SDPA 和整批一次调，结果相同，时间差一个数量级以上（这一格的时间随机器而变；为了量调用本身，计时时只开一个线程）：

# %%
# NBVAL_IGNORE_OUTPUT
import time

B = 32
dec_pool = MHAKVCachePool(HKV, 1, D, num_pages=B * 16, page_size=PAGE, dtype=torch.float32,
                          device="cpu")
dec_pool.kv_buffer.normal_(generator=gen)
dec_table = torch.arange(B * 64, dtype=torch.int32).view(B, 64)  # 每个请求独占 16 页
dec_backend = create_attention_backend("torch", dec_pool, dec_table)
dec_reqs = [make_req(i, 2 + (37 * i) % 60) for i in range(B)]
for r in dec_reqs:
    r.complete_one()  # 都进入 decode：每个请求 1 个 query
dec_batch = Batch(reqs=dec_reqs, phase="decode")
dec_batch.padded_reqs = dec_reqs
dec_backend.prepare_metadata(dec_batch)
dm = dec_batch.attn_metadata
qd = randn(B, HQ, D)
kc, vc = dec_pool.k_cache(0), dec_pool.v_cache(0)


def timed(fn, repeat=20):
    fn()
    t0 = time.perf_counter()
    for _ in range(repeat):
        out = fn()
    return out, (time.perf_counter() - t0) / repeat * 1e3


threads = torch.get_num_threads()
# 单线程量的是调用本身；多线程在忙碌的机器上，小调用会被线程之间的等待淹没
torch.set_num_threads(1)
try:
    loop_out, loop_ms = timed(lambda: dec_backend._forward_per_request(qd, kc, vc, dm))
    batched_out, batched_ms = timed(lambda: dec_backend._forward_single_query(qd, kc, vc, dm))
finally:
    torch.set_num_threads(threads)
assert torch.allclose(loop_out, batched_out, atol=1e-5)
print(f"{B} 个 decode 请求（key 数 {min(dm.seq_lens_k)}～{max(dm.seq_lens_k)}），一层：")
print(f"  逐个请求 {B} 次 SDPA：{loop_ms:.2f} ms")
print(f"  补齐后 1 次 SDPA   ：{batched_ms:.2f} ms")

# %% [markdown]
# 第 17 章的后端把这三条一起换掉。FlashAttention 的 `flash_attn_with_kvcache` / 变长接口和 FlashInfer 的 `BatchPrefillWithPagedKVCacheWrapper`、`BatchDecodeWithPagedKVCacheWrapper` 都是**一次内核调用算完整批**：拿着 `cu_seqlens` 知道每个请求的 query 在哪，拿着页表（或把页表摊平成的一维 `indices`）在内核里直接去各页读 K/V，不做 gather 拷贝；GQA 按 `h // group` 去读同一份 KV 头，不复制；变长的 key 不补齐，各请求读各自的长度；因果掩码由内核按位置生成，右下对齐。我们的接口不用变：`prepare_metadata` 算的还是这几样——`cu_seqlens`、每个请求的 key 数、页表——只是交给内核时换一种排布。
#
# ## 运行
#
# 把本章的 main 跑一遍（输出就是在本章的树里真实跑出来的）：

# %%
run("python examples/ch05_attention.py")

# %% [markdown]
# 值得注意的地方：
#
# - **第一节的元数据**：`seq_lens_q=[6, 4, 3]`、`seq_lens_k=[6, 9, 3]`——只有 uid 1 的 key 比 query 多，差的 5 个就是它缓存的前缀；`cu_seqlens_q=[0, 6, 10, 13]` 就是图上那三道刻度。
# - **两张掩码**：右下对齐时第一行（位置 5）看见 6 个 key，每往下一行多一个；左上对齐时第一行只看见 1 个。`is_causal=True` 的最大误差是个量级为 1 的数——注意力输出本身就在这个量级上，等于完全错了；而同一批里 uid 0 和 uid 2（没有缓存）用 `is_causal=True` 反而是对的，这就是这个 bug 难抓的原因。
# - **decode 的 key_mask**：每一步每行多一个 1；最长的请求（uid 1）整行都是 1，它决定了补齐的宽度。整批都是 `single_query=True`，一次 SDPA。
# - **朴素注意力的误差**都小于 1e-5，而池子一开始是满满的 NaN：没有任何一次读到过没写的槽位。
# - **真模型**：三个提示长度 5、1、23，同一批 prefill 再 decode 五步，与 Hugging Face 逐 token 相同。tiny Qwen3 的权重是随机的，生成的 token 没有语义，要比的只是“一样”。到这里，从第 2 章的层、第 3 章的模型和加载器、第 4 章的 KV 池到本章的后端，整条前向路径第一次用分页的 KV 缓存跑通了；第 6 章把这些装进 `Engine`。

# %% [markdown]
# ## 与官方的差异
#
# 接口的形状与上游 mini-sglang 一致（`prepare_metadata` / `forward(q, k, v, layer_id, batch)`、元数据挂在 `batch.attn_metadata` 上、先 `store_kv` 后算），读完本书去读上游的后端不需要重新认识它们。差别在于：
#
# - **上游没有 CPU 后端。** 上游的后端全是 GPU 内核：`fa`（`sgl_kernel.flash_attn` 的 `flash_attn_with_kvcache`）、`fi`（FlashInfer 的分页 prefill / decode wrapper）、`trtllm`（FlashInfer 里 TensorRT-LLM 的内核）。我们的 `"torch"` 后端是本书为了在 CPU 上讲清楚、也为了给测试当参照而写的；第 17 章再把 FlashAttention、FlashInfer 风格的后端加进来。
# - **接口的其余部分。** 上游 `BaseAttnBackend` 还有 `init_capture_graph`、`prepare_for_capture`、`prepare_for_replay` 三个方法，服务 CUDA Graph（第 18 章）；较新的版本里 `forward` 还带关键字参数 `window_size`（滑动窗口）和 `softmax_scale`。上游的 `BaseAttnMetadata` 有一个抽象方法 `get_last_indices(bs)`（`cu_seqlens_q[1:1+bs] - 1`），输出层用它挑出每个请求最后一个 token；我们的 `ParallelLMHead` 直接从各请求的 `extend_len` 算（第 2 章），元数据基类是空的。
# - **prefill 和 decode 可以用不同的后端。** 上游的 `HybridBackend` 包着一个 prefill 后端和一个 decode 后端，按 `batch.is_prefill` 二选一；后端名写成 `"fa,fi"` 就是 prefill 用 FlashAttention、decode 用 FlashInfer。我们只有一个后端，路径按形状（`single_query`）在内部选。上游的 FlashAttention 后端同样按形状（`max_seqlen_q == 1`）决定 `cu_seqlens_q`，FlashInfer 后端则按 `batch.is_decode` 选 wrapper。
# - **元数据的排布。** 上游 FlashAttention 后端的元数据是 `cu_seqlens_q`、`cu_seqlens_k`、`cache_seqlens`、`max_seqlen_q/k` 加一张按页的表（页表每隔 page_size 取一列再除以 page_size，得到页号）；FlashInfer 后端把各请求的槽位首尾相接成一维的 `indices`（只支持 page_size = 1），不补齐。我们的 `kv_indices` 是补齐到 `[B, max_k]` 的槽位表加 `key_mask`，因为 SDPA 只认矩形的批次。
# - **构造参数。** 上游的后端从 `ModelConfig` 读头数和 head_dim（`scale = head_dim ** -0.5` 在构造时算好），从全局上下文拿 KV 池和页表；我们只传 `(kvcache, page_table)`，头数从张量形状读出。检查用 `ValueError` 而不是 `assert`。
#
# ### 官方实现
#
# 上游仓库 `sgl-project/mini-sglang`：
#
# - 接口：`python/minisgl/attention/base.py` · `BaseAttnMetadata`、`BaseAttnBackend`、`HybridBackend`
# - 按名字创建：`python/minisgl/attention/__init__.py` · `create_attention_backend`（`"auto"` 按 GPU 架构选，逗号分隔的名字组成 `HybridBackend`）
# - FlashAttention：`python/minisgl/attention/fa.py` · `FlashAttentionBackend.prepare_metadata`、`FlashAttentionBackend.forward`（先 `store_kv`，再 `_fa_sgl_impl` 调 `flash_attn_with_kvcache`，`causal=True`）
# - FlashInfer：`python/minisgl/attention/fi.py` · `FlashInferBackend.prepare_metadata`、`FlashInferBackend._initialize_metadata_once`（每批一次 `plan`，在第一层的 `forward` 里做）、`FlashInferBackend.forward`（`wrapper.run`）
# - TensorRT-LLM 内核：`python/minisgl/attention/trtllm.py` · `TensorRTLLMBackend`
# - 谁调用 `prepare_metadata`：`python/minisgl/scheduler/scheduler.py` · `Scheduler._prepare_batch`（分配槽位、算 positions 和 `out_loc` 之后，紧接着准备元数据；重叠调度时它与上一批的前向同时进行）

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch05_attention.py`，不需要模型。参照是一个 float64 的朴素注意力：逐个 query、逐个头，只看位置 ≤ 自己的 key，第 h 个 q 头用第 `h // group` 个 KV 头——每一条规则都直接写出来，没有掩码、没有补齐、没有页表。测试搭一个小“世界”：KV 池先填满 NaN，页表填满 -1（负下标会从池子末尾取，取到的也是 NaN），每个请求的 K/V 历史另记一份给参照用：

# %% tags=["remove-input"]
listing("tests/test_ch05_attention.py", "World.step")

# %% [markdown]
# 每个测试在随机长度上跑若干步，每一层、每个请求都与参照逐元素比较，三种头的配比（每个 KV 头对应 1、2、4 个 q 头）乘以 page_size 1 和 4。最能说明问题的是 decode 这个：prefill 之后 decode 五步，中途一个请求结束、一个新请求 prefill 后加入，批里的长度始终参差不齐，必须补齐：

# %% tags=["remove-input"]
listing("tests/test_ch05_attention.py", "test_decode_batches_of_different_lengths")

# %% [markdown]
# 另一个把 `is_causal=True` 的错钉死：同一个带缓存前缀的请求，我们的输出与参照一致，左上对齐的 SDPA 与参照的误差大于 0.1，连最后一个 query 也不对（左上对齐时它只看见前 4 个 key）；配套的另一个测试确认没有前缀时两者相同——这个 bug 只在有前缀时才出现。

# %% tags=["remove-input"]
listing("tests/test_ch05_attention.py", "test_is_causal_true_is_wrong_with_a_cached_prefix")

# %% [markdown]
# 其余测试覆盖：掩码的取值（含随机的 `(n_q, n_k)`）、带缓存前缀的 prefill、一个 prefill 批里混着没缓存的、有缓存的和只差 1 个 token 的请求、全部只差 1 个 token 的 prefill 走批量路径、K/V 写进了正确的那一层（别的层仍是 NaN）、prefill 的元数据、bf16 的池子、token 数对不上时的报错、按名字创建后端。在本章的树里跑全部：

# %%
run("python -m pytest -q --color=no tests/test_ch05_attention.py")

# %% [markdown]
# ## 怎么讲清楚
#
# 注意力后端是模型里唯一需要知道“批里有谁”的地方：别的层都逐 token 计算，一批请求的 token 首尾相接、不补齐地往下传，只有注意力要让每个 token 看见它自己那个请求的全部 key，而这些 key 大多是早先算好、散落在 KV 池各页上的。所以接口分两步：`prepare_metadata` 每批一次，把各请求的 query 数、key 数、`cu_seqlens`（前缀和，标出每个请求在拼接序列里的起止）和每个 key 的槽位（从页表抄出来）整理好，所有层共用，也能在 GPU 算上一批时提前准备；`forward` 每层一次，先把这一步的 K/V 写进池子——新 token 也是自己的 key——再按槽位取回每个请求的完整 K/V 做注意力。因果掩码要按绝对位置比较：有缓存前缀、分块 prefill 或 decode 时 query 比 key 少，它们是序列的最后几个 token，掩码贴着右下角；SDPA 的 `is_causal=True` 贴着左上角，只在没有缓存时才对，这个错不报错、形状全对，最容易漏。decode 每个请求一个 query、不需要因果掩码，补齐成矩形一次算完，用 key mask 遮掉补出来的列；补出来的列要指向写过的槽位，因为掩码挡不住 NaN——`NaN + (-inf)` 和 `0 × NaN` 都是 NaN。CPU 上的参考实现慢在逐请求循环、gather 拷贝和补齐；FlashAttention、FlashInfer 的变长分页内核一次算完整批，直接按页表读 K/V，接口不变。

# %% [markdown]
# ## 练习
#
# 1. **滑动窗口注意力。** 有的模型（Mistral、Gemma 2 的一部分层）规定每个 token 只看最近的 W 个 token（含自己）。`causal_mask_bottom_right` 要怎么改？在逐请求的路径上，除了改掩码，还能省掉什么？
# 2. **一个长请求拖住一批短请求。** 一个 prefill 批里 31 个请求都只剩最后 1 个 token 要算（前缀缓存命中了 `len - 1` 个），另有 1 个请求有 2000 个新 token。这一批走哪条路径？每层调几次 SDPA？不换内核，你会怎样改 `forward` 让它少调几次？
# 3. **把池子清零行不行？** 有人提议：`MHAKVCachePool` 改用 `torch.zeros` 分配，这样补齐的列随便指向哪个槽位都不会有 NaN，`prepare_metadata` 里 `clamped` 那一行就可以删掉。这样做对吗？有什么代价，丢掉了什么？
# 4. **补齐白算多少。** decode 批里有 31 个 key 数为 16 的请求和 1 个 key 数为 4000 的请求。按本章的补齐方式，一层要算多少个 q·k 分数，其中有用的占多少？说出两种不换内核就能减少浪费的办法。
#
# ??? success "参考答案"
#
#     1. 在右下对齐的条件上再加一个下界：位置 p 的 query 看见位置 `p - W + 1 … p` 的 key，即 `(k_pos <= q_pos) & (k_pos > q_pos - W)`，可见区域变成一条贴着右下角的斜带。既然第 i 个请求最早的 query 在位置 `n_k - n_q`，它用得到的 key 最早从 `n_k - n_q - W + 1` 开始，更早的 key 根本不必从池里取出来：`kv_indices[i, start:num_k]` 只取这一段，掩码相应平移。decode 时只取最后 W 个 key，长上下文下 gather 的量从 n_k 降到 W。（再进一步，窗口之外的页可以还给分配器，那是上游 `window_size` 参数和 SGLang 的滑动窗口内存管理要做的事。）
#     2. 只要有一个请求不止 1 个 query，`single_query` 就是假，整批走逐请求路径：每层 32 次 SDPA。改法：在 `forward` 里把请求按 `seq_lens_q == 1` 分成两组，只有 1 个 query 的那 31 个走批量路径（它们也不需要因果掩码：唯一的 query 是各自序列的最后一个 token），其余的逐个算，再按原顺序把输出写回 `[T, hq, d]`——每层 2 次 SDPA。元数据要多存一份分组信息，这正适合放进 `prepare_metadata`。
#     3. 对“不出 NaN”而言是对的：清零后没写过的槽位是 0，被掩码遮掉后权重为 0、乘 0 也是 0。代价是启动时把整个池子（常常几十 GB）写一遍，这还可以接受；真正的损失在别处。一是页表那一行 `device_len` 之后的列不一定是合法的槽位（测试故意填 -1，真实引擎里可能是上一个请求留下的旧槽位），`clamped` 保证了根本不去读它们，删掉它就要另外保证页表的“尾巴”干净。二是清零会把 bug 藏起来：本章的测试把池子填满 NaN，任何一次读到没写过的槽位都会当场暴露；池子是 0 时，读错槽位只会让结果“有点不对”。
#     4. 补齐后每层每个头要算 32 × 4000 = 128000 个分数，有用的是 31 × 16 + 4000 = 4496 个，约 3.5%。不换内核的办法：按 key 数分桶，长度相近的请求放进同一次 SDPA（比如 31 个短的一批、长的单独一次，合计 2 次调用、几乎不补齐）；或者规定补齐只到某个上限，超出的请求走逐个的路径。根本的办法是第 17 章的变长分页内核：各请求读各自的长度，不补齐。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 15   # 把第 15 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 15    # 判题
# python practice/judge.py hint 15    # 卡住了看提示
# ```
#
# 015 用纯 Python 算出本章元数据里的那几张表（外加 `cu_seqlens_k`、`positions` 和每个请求最后一个 token 的下标）和右下对齐的掩码；016 是本章 prefill 路径的核心——按页表取 K/V、右下对齐的掩码、GQA，测试里一定有带缓存、一次多个 query 的请求，左上对齐过不了；017 是 decode 路径：补齐、key mask、整批只许调用一次 SDPA。

# %% [markdown]
# ## 小结
#
# - 注意力后端是模型里唯一需要知道“批里有谁”的地方；接口是 `prepare_metadata(batch)`（每批一次，所有层共用，可以提前做）和 `forward(q, k, v, layer_id, batch)`（每层一次）。
# - 变长批次不补齐 q：`cu_seqlens_q` 标出每个请求在拼接序列里的起止；`kv_indices` 是从页表抄出的每个 key 的槽位，页多大后端不用管。
# - `forward` 先 `store_kv` 再取 K/V：这一步的新 token 也是 key。
# - 因果掩码按绝对位置比较，贴着右下角；`is_causal=True` 贴着左上角，只在没有缓存前缀时才对，前缀缓存、分块 prefill、decode 都会错。
# - prefill 每个请求一次 SDPA；每个请求恰好 1 个 query 时（按形状判断），补齐成矩形一次算完，`key_mask` 遮掉补齐的列。补齐的列指向最后一个真实槽位：掩码挡不住 NaN。
# - GQA 用 `repeat_interleave`，q 头 j 用 KV 头 `j // group`，与 HF 的 `repeat_kv` 相同；缩放显式传 `head_dim ** -0.5`。
# - CPU 参考实现慢在逐请求循环、gather 拷贝和补齐；第 17 章的变长分页内核一次算完整批、直接按页读 K/V，接口不变。
