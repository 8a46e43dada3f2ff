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
# 除了注意力，模型的每一层都逐 token 计算，一批请求的 token 首尾相接往下传就行；注意力却要让每个 token 看见它自己那个请求的全部 key，而这些 K/V 大多是早先算好、散落在 [KV 池](../glossary.md#kv-pool)各页里的。办法是把这件事交给一个[注意力后端](../glossary.md#attention-backend)：每批先整理一次元数据，每层再先存新的 K/V、按[页表](../glossary.md#page-table)取回、做注意力。本章写出它的接口和一个建在 torch `scaled_dot_product_attention`（SDPA）上的参考实现，并让三种最常见的错——左上对齐的因果掩码、先算后存、补齐时读到没写过的槽位——在屏幕上各失败一次。做对之后，tiny Qwen3 用它生成的 token 与 Hugging Face 逐个相同。

# %% tags=["remove-cell"]
from minibook.page import *
_ = setup(5)  # 赋值而不显示：返回的树路径随机器而变

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 注意力后端为什么拆成 `prepare_metadata(batch)` 和 `forward(q, k, v, layer_id, batch)`？28 层的模型跑一步，各调用几次？
# 2. 一个请求缓存了 4 个 token，这一步送进来 3 个。用 SDPA 的 `is_causal=True`，第 0 个 query 能看见哪些 key？它应该看见哪些？
# 3. `forward` 为什么要先把这一步的 K/V 写进 KV 池，再去 KV 池里取？
# 4. decode 时把各请求的 key 补齐成一样长，补出来的列反正会被掩码遮掉，为什么不能随便指向一个槽位？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 元数据只取决于批次，对所有层都一样，所以每批算一次；`forward` 要用这一层的 q/k/v 和这一层的 KV 池。一步里 `prepare_metadata` 1 次，`forward` 28 次。
#     2. `is_causal=True` 是左上对齐的下三角，第 0 个 query 只看见 key 0。它在序列里的位置是 4，应该看见 key 0…4。
#     3. 这一步的新 token 也是 key：每个新 token 要看见自己和它前面的新 token。先取后存，这些槽位里还是旧数据或没初始化的内存。
#     4. 没写过的槽位里可能是 NaN，而 `NaN + (-inf)` 和 `0 × NaN` 都是 NaN，掩码挡不住。所以补齐的列重复这个请求最后一个真实 key 的槽位，那里刚写过。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章新建 `minisgl/attention/` 包：`base.py` 是接口，`sdpa.py` 是参考后端，`__init__.py` 按名字创建后端。第 2 章的 `AttentionLayer` 调用它，第 4 章的 KV 池和页表给它存取 K/V 的地方。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch05_attention.py`：先用随机的 q/k/v 让三个请求一起 prefill（其中一个命中了 5 个 token 的[前缀缓存](../glossary.md#prefix-cache)）、再 decode 两步，每一层都与逐个 query 循环的 float64 朴素注意力对照；最后让 tiny Qwen3 用这个后端生成，与 Hugging Face 逐 token 对照。`python tools/steps.py check 5` 会搭出本章的树、跑这个 main 和本章的测试；只跑 main：
#
# ```bash
# python tools/steps.py run 5 -- python examples/ch05_attention.py
# ```
#
# main 里“调度器”的活只有几行：分配这一步的槽位、填好 `Batch`、调一次 `prepare_metadata`。

# %% tags=["remove-input"]
listing("examples/ch05_attention.py", "prepare_batch")

# %% [markdown]
# ## 一张图：同一个请求的 K/V 散在各页，靠页表找回
#
# ![上半：三个请求的 q 首尾相接；kv_indices 是从页表里取出的每个 key 的槽位，补齐部分重复最后一个槽位。下半：forward 先把新 K/V 写到 out_loc，再按 kv_indices 取回每个请求的 K/V，逐个请求做 SDPA，拼回原顺序](../assets/ch05_paged_flow.svg)
#
# 图里是 main 第一节的那一批（page_size = 4）：请求 1 的前 5 个 token 早已在池里（绿），这一步的 13 个新 token 写到 [out_loc](../glossary.md#out-loc)（橙）。同一个请求的 K/V 在池里并不连续，后端要靠页表把它们找回来。

# %% [markdown]
# ## 元数据每批一次，forward 每层一次
#
# 第 2 章的 `AttentionLayer` 切好 q/k/v、做完 RoPE，最后一行把它们交给后端：

# %% tags=["remove-input"]
listing("minisgl/layers/attention.py", "AttentionLayer.forward")

# %% [markdown]
# 层只知道自己的层号和当前批次，不知道 KV 池、页表和批里有谁。后端的接口就两个方法：

# %% tags=["remove-input"]
listing("minisgl/attention/base.py", "BaseAttnBackend")

# %% [markdown]
# 谁缓存了多长、谁在页表的哪一行，只取决于批次，与层无关：放进 `forward`，Qwen3-0.6B 每步就要把同样的东西算 28 遍。所以[注意力元数据](../glossary.md#attn-metadata)由 `prepare_metadata` 每批算一次，挂在 `batch.attn_metadata` 上，所有层共用。后端按名字由 `create_attention_backend` 创建，本章只有 `"torch"` 一个。
#
# ??? note "深入：拆成两步的另外几个理由"
#
#     - **可以提前做。** 元数据的准备与前向分开，又挂在批次上而不是存在后端里，两个批次就能各带各的元数据同时存在：设备还在算上一批时，CPU 可以先为下一批分配槽位、准备元数据（第 11 章的重叠调度就这样做）。
#     - **图重放时前向里不能有 Python。** 把 decode 的前向录成 CUDA 图反复重放时，元数据必须在重放之前写进固定的缓冲区；上游的接口为此多了 `prepare_for_capture` / `prepare_for_replay`。
#     - **快的内核本来就这么分。** FlashInfer 的批量注意力先 `plan`（在 CPU 上按各请求长度划分工作），再每层 `run`：`plan` 属于 `prepare_metadata`，`run` 属于 `forward`。

# %% [markdown]
# ## 变长批次：q 不补齐，K/V 按页表取
#
# 注意力以外的层都逐 token 计算，所以 q 就是 `[T, hq, d]`，T 是这一步所有新 token 之和，不补齐：补齐的话，3 个 token 的提示也要陪 2000 个 token 的提示算 2000 行。这就是[变长批次](../glossary.md#varlen)，边界要由注意力自己知道，`prepare_metadata` 把它写成几张表：

# %% tags=["remove-input"]
listing("minisgl/attention/sdpa.py", "SDPAAttnMetadata")

# %% tags=["remove-input"]
listing("minisgl/attention/sdpa.py", "SDPAAttnBackend.prepare_metadata")

# %% [markdown]
# `kv_indices[i, j]` 是请求 i 第 j 个 key 的[槽位](../glossary.md#slot)，一次高级索引从页表里取出；页表存的是槽位而不是页号，所以后端不必知道页多大。超过 `device_len` 的列被夹到最后一个真实的槽位，下文 decode 一节会看到为什么。在本章的树里把图上那一批搭出来：

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


def make_req(row, prompt_len, cached_len=0):
    return Req(input_ids=torch.arange(prompt_len, dtype=torch.int32), table_idx=row,
               cached_len=cached_len, output_len=8, uid=row,
               sampling_params=SamplingParams(max_tokens=8), cache_handle=None)


def make_batch(reqs, phase):
    """调度器的活：分配这一步的槽位、填好 Batch、准备元数据。"""
    batch = Batch(reqs=reqs, phase=phase)
    batch.padded_reqs = reqs
    batch.out_loc = alloc.alloc_slots(reqs)
    backend.prepare_metadata(batch)
    return batch


pool = MHAKVCachePool(HKV, LAYERS, D, num_pages=16, page_size=PAGE, dtype=torch.float32,
                      device="cpu")
pool.kv_buffer.fill_(float("nan"))  # 没写过的槽位是 NaN：谁读到了，结果里就有 NaN
page_table = torch.full((4, 32), -1, dtype=torch.int32)  # -1 也是陷阱：负下标会从末尾取
alloc = PageAllocator(16, PAGE, page_table)
backend = create_attention_backend("torch", pool, page_table)

# 请求 1 的前 5 个 token：更早的一次前向在同一行算过，K/V 已在池里
prefix_loc = alloc.alloc_slots([make_req(1, 5)])
for layer in range(LAYERS):
    pool.store_kv(randn(5, HKV, D), randn(5, HKV, D), prefix_loc, layer)

reqs = [make_req(0, 6), make_req(1, 9, cached_len=5), make_req(2, 3)]
batch = make_batch(reqs, "prefill")
meta = batch.attn_metadata
print("seq_lens_q =", meta.seq_lens_q, "  seq_lens_k =", meta.seq_lens_k,
      "  single_query =", meta.single_query)
print("out_loc    =", batch.out_loc.tolist())
print("kv_indices =")
for row in meta.kv_indices.tolist():
    print("   ", row)
assert meta.kv_indices.tolist() == [[8, 9, 10, 11, 12, 13, 13, 13, 13],
                                    [0, 1, 2, 3, 4, 5, 6, 7, 16],
                                    [20, 21, 22, 22, 22, 22, 22, 22, 22]]

# %% [markdown]
# 与图上一格不差：请求 1 的位置 5、6、7 接着写进 1 号页剩下的槽位，位置 8 才开新的 4 号页。
#
# ??? note "深入：列表怎样到 GPU，而 CPU 不停下来等"
#
#     `seq_lens_k` 和每个请求的页表行号是 Python 列表，要先变成设备上的张量。`torch.tensor(list, device="cuda")` 从普通（可换页）内存拷贝，CPU 要等这次拷贝做完才往下走，每步都在关键路径上停一下。`to_device` 在 CUDA 上先把列表放进[锁页内存](../glossary.md#pinned-memory)，再 `non_blocking=True` 拷贝：CPU 只是把拷贝排进流里就返回，同一条流上后面的内核一定在拷贝之后执行。临时的锁页张量在拷贝完成前被释放也没关系，PyTorch 的锁页内存分配器会等拷贝结束才复用那块内存。CPU 上两者完全一样，所以本书的输出不受影响；`tests/test_ch05_attention.py` 里有一个只在有 CUDA 时运行的测试，比较 GPU 和 CPU 上算出的元数据。
#
#     上游 mini-sglang 的 FlashAttention 后端也是这样把长度列表交给 GPU 的。

# %% [markdown]
# ## 先存，后算
#
# 这一步的新 token 也是 key：请求 1 位置 7 的 query 要看见位置 5、6、7，它们就是这一步刚算出来的。把顺序颠倒过来试试——直接调内部的逐请求路径，跳过存储：

# %%
q, k, v = randn(13, HQ, D), randn(13, HKV, D), randn(13, HKV, D)
attend_first = backend._forward_per_request(q, pool.k_cache(0), pool.v_cache(0), meta)  # 没存就算
out = backend.forward(q, k, v, 0, batch)  # 正常顺序：先存后算
bounds = [0, 6, 10, 13]  # 三个请求在 q 里的起止
for name, o in (("先算后存", attend_first), ("先存后算", out)):
    nan_reqs = [i for i in range(3) if o[bounds[i]:bounds[i + 1]].isnan().any()]
    print(f"{name}：输出里有 NaN 的请求 {nan_reqs}")
assert attend_first.isnan().any() and not out.isnan().any()
assert torch.equal(pool.k_cache(0)[batch.out_loc], k)
assert pool.k_cache(1)[batch.out_loc].isnan().all()  # 只写了第 0 层：第 1 层的这些槽位还是 NaN

# %% [markdown]
# 三个请求都读到了 NaN，包括前缀完好的请求 1。真引擎的 KV 池里不是 NaN，而是上一个请求留下的数，结果就悄悄错掉。所以 `forward` 的第一件事是 `store_kv`：

# %% tags=["remove-input"]
listing("minisgl/attention/sdpa.py", "SDPAAttnBackend.forward")

# %% [markdown]
# K/V 只写进 `layer_id` 那一层（上一格最后一个断言：第 1 层的这些槽位还是 NaN）。开头的断言确认 q 的 token 数与元数据一致：`prepare_metadata` 之后批次若被改过，这里当场报错，而不是算出一串错位的结果。

# %% [markdown]
# ## is_causal=True 贴着左上角，有缓存前缀就错
#
# 请求有 `n_k` 个 key、这一步有 `n_q` 个 query 时，这些 query 是序列的**最后** `n_q` 个 token，第 i 个的位置是 `n_k - n_q + i`。SDPA 的 `is_causal=True` 却让第 i 个 query 只看 key 0…i。拿缓存 4 个、这一步 3 个的请求，与逐个 query 循环的 float64 朴素注意力比一比：

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
print(f"右下对齐与朴素注意力的最大误差 < 1e-5：{err_ours < 1e-5}")
print(f"is_causal=True 与朴素注意力的最大误差：{err_wrong:.2f}")
assert err_ours < 1e-5 and err_wrong > 0.1

from torch.nn.attention.bias import causal_lower_right

same = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=causal_lower_right(nq, nk),
                                      scale=D ** -0.5)
assert torch.allclose(same, ours, atol=1e-6)
print("torch 自带的 causal_lower_right 与我们的掩码结果一致")

# %% [markdown]
# 左上对齐时位置 4 的 query 只看见 key 0：不报错，形状全对，数值全错。两个三角只在 `n_q == n_k`（没有缓存前缀）时重合，所以只拿没有缓存的 prefill 去测，这个错能一直藏下去。右下对齐的[因果掩码](../glossary.md#causal-mask)按绝对位置比较，只有三行：

# %% tags=["remove-input"]
listing("minisgl/attention/sdpa.py", "causal_mask_bottom_right")

# %% [markdown]
# ![上：缓存 5 个、这一步 4 个 query 的请求，右下对齐的掩码与 is_causal=True 的左上对齐掩码，红格是本该看见却被遮掉的 key。下：decode 一步，三个请求补齐到 10 个 key，补齐的格子重复最后一个真实槽位](../assets/ch05_masks.svg)
#
# 掩码只取决于长度，所以和其余元数据一样在 `prepare_metadata` 里每批建一次。torch 自带的 `causal_lower_right` 给出同样的结果（上面最后一行）；自己写这三行，是为了把“按绝对位置比较”摆在明处。
#
# ??? note "深入：n_q 和 n_k 什么时候不相等"
#
#     这是推理引擎的日常，不是边角情况：
#
#     | 场景 | n_q | n_k | `is_causal=True` |
#     | --- | --- | --- | --- |
#     | 没有缓存的 prefill | 提示长 | 提示长 | 对（两个三角重合） |
#     | 命中前缀缓存的 prefill | 没命中的部分 | 整个提示 | 错 |
#     | 分块 prefill 的后几块 | 这一块 | 之前的块 + 这一块 | 错 |
#     | decode | 1 | 整段历史 | 错：唯一的 query 只看见 key 0 |
#
#     换内核时要查它的 causal 是哪种对齐：FlashAttention 从 2.1 版起，`causal=True` 在 `seqlen_q ≠ seqlen_k` 时右下对齐（此前是左上对齐）；FlashInfer 的 `causal=True` 也按“query 是最后几个 token”对齐；PyTorch 文档写明 `is_causal=True` 是左上对齐。

# %% [markdown]
# ## prefill：一个请求一次 SDPA，GQA 交给 enable_gqa
#
# 只要批里有一个请求不止 1 个 query，`forward` 就逐个请求算：

# %% tags=["remove-input"]
listing("minisgl/attention/sdpa.py", "SDPAAttnBackend._forward_per_request")

# %% [markdown]
# 每个请求按 `kv_indices[i, :num_k]` 用 `index_select` 把自己的 K/V 取成连续的一段，配上自己的右下对齐掩码；输出按原顺序拼回 `[T, hq, d]`，第 t 行仍对应 q 的第 t 行。真正调用 SDPA 的只有一处，[GQA](../glossary.md#gqa) 也在这里：

# %% tags=["remove-input"]
listing("minisgl/attention/sdpa.py", "SDPAAttnBackend._sdpa")

# %% tags=["remove-input"]
listing("minisgl/attention/sdpa.py", "repeat_kv_heads")

# %% [markdown]
# 池里只存 KV 头。`repeat_kv_heads` 写明了 GQA 的意思：每个 KV 头复制 `group` 份，相邻的 q 头共用一个；`_sdpa` 把同样的对应交给 SDPA 的 `enable_gqa=True`，不真的复制。对应的方式决定哪些 q 头共用一个 KV 头，必须与模型训练时一致。拿 Qwen3-0.6B 的 16 个 q 头、8 个 KV 头，与 Hugging Face 的 `repeat_kv` 比一比，再看看 `repeat` 错在哪：

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
kv_of_q_wrong = which_kv(x.repeat(1, 2, 1, 1))  # 常见的错：repeat 而不是 repeat_interleave
print("repeat_interleave：q 头 0..15 用的 KV 头", kv_of_q)
print("repeat（错）      ：q 头 0..15 用的 KV 头", kv_of_q_wrong)
assert kv_of_q == [h // 2 for h in range(16)] and kv_of_q_wrong != kv_of_q

# %% [markdown]
# `repeat` 让 q 头 1 配上 KV 头 1，而它本该和 q 头 0 共用 KV 头 0。这同样不报错，只是错。
#
# 真复制一份 K/V 要花多少？拿 SmolLM2 的形状（9 个 q 头、3 个 KV 头、head_dim 64）做一步 decode 注意力：64 个请求、每个 384 个 key，先复制再算，和 `enable_gqa=True` 比（本机实测，随机器而变）：

# %%
# NBVAL_IGNORE_OUTPUT
import time

from minisgl.attention.sdpa import SDPAAttnBackend

g = torch.Generator().manual_seed(1)  # 自己的随机数，不动后面单元要用的 gen
q1 = torch.randn(64, 9, 1, 64, generator=g)
k1, v1 = torch.randn(2, 64, 3, 384, 64, generator=g)
key_mask = torch.ones(64, 1, 1, 384, dtype=torch.bool)


def copy_then_sdpa():
    return F.scaled_dot_product_attention(q1, repeat_kv_heads(k1, 9), repeat_kv_heads(v1, 9),
                                          attn_mask=key_mask, scale=64 ** -0.5)


def best_ms(fn, reps=5):
    fn()  # 热身
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times) * 1000


assert torch.equal(copy_then_sdpa(), SDPAAttnBackend._sdpa(q1, k1, v1, key_mask))  # 逐位相同
slow, fast = best_ms(copy_then_sdpa), best_ms(lambda: SDPAAttnBackend._sdpa(q1, k1, v1, key_mask))
print(f"先复制 K/V 再算：{slow:.1f} ms；enable_gqa：{fast:.1f} ms（{slow / fast:.1f} 倍）")
print(f"复制出来的 K/V：{2 * q1.shape[0] * 9 * 384 * 64 * 4 / 2**20:.0f} MiB，一层、一步就要写这么多")

# %% [markdown]
#
# ??? note "深入：显式的缩放和 index_select"
#
#     - 缩放 `head_dim ** -0.5` 和 SDPA 的默认值相同，仍然显式传入：有的模型用别的缩放（Gemma 2 按 config 里的 `query_pre_attn_scalar` 算），写明了就不会在换模型时悄悄沿用一个错的默认值。上游的 `forward` 为此留了 `softmax_scale` 参数。
#     - `index_select` 按一维下标取行，在 CPU 上比拿 int32 张量做高级索引快好几倍；取出来的是一份**拷贝**，这是参考后端的代价之一（见本章末的“代价”）。

# %% [markdown]
# ## decode：补齐成一批，掩码挡不住 NaN
#
# [decode](../glossary.md#decode) 时每个请求只有 1 个 query，它是序列的最后一个 token，本来就该看见全部 key：不需要因果掩码，`prepare_metadata` 也就不建（`causal_masks` 为空）。各请求只差 key 数，于是把 K/V 补齐成 `[B, max_k]`，用 `key_mask` 遮掉补出来的列，整批一次 SDPA。接着上面那一批 decode 一步：

# %%
for r in reqs:
    r.complete_one()
dbatch = make_batch(reqs, "decode")
dmeta = dbatch.attn_metadata
print("seq_lens_k =", dmeta.seq_lens_k, "  single_query =", dmeta.single_query,
      "  因果掩码", len(dmeta.causal_masks), "个")
print("kv_indices（· 后面是补齐的列）：")
for row, n in zip(dmeta.kv_indices.tolist(), dmeta.seq_lens_k):
    print("   ", " ".join(f"{s:2d}" for s in row[:n]), "·", " ".join(f"{s:2d}" for s in row[n:]))
assert dmeta.single_query and dmeta.causal_masks == [] and dmeta.kv_indices.shape == (3, 10)
assert dmeta.kv_indices[0, 7:].tolist() == [14] * 3  # 重复请求 0 最后一个槽位
assert dmeta.kv_indices[2, 4:].tolist() == [23] * 6

# %% [markdown]
# 补齐的列重复各自最后一个真实槽位（14、23）。反正会被遮掉，为什么不随便指向一个槽位？把它们改成一个从没写过的槽位试试：

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
# 掩码一格不差，请求 0 和 2 仍然整行 NaN；请求 1 没有补齐的列，不受影响。SDPA 的布尔掩码是给分数加上 `-inf`，`NaN + (-inf)` 还是 NaN，权重 0 乘上 V 里的 NaN 也还是 NaN。KV 池是 `torch.empty` 分配的，没写过的槽位里什么都可能有，所以补齐必须读写过的槽位。批量路径本身很短：

# %% tags=["remove-input"]
listing("minisgl/attention/sdpa.py", "SDPAAttnBackend._forward_single_query")

# %% [markdown]
# 走哪条路径看的是形状（`single_query`），不是 `batch.phase`：每个请求都只差最后 1 个 token 的 prefill，也走这条批量路径。

# %% [markdown]
# ## 代价：逐个请求调用，比整批一次慢好几倍
#
# 这个后端求的是一眼看得出对，不是快。同一批 32 个 decode 请求，逐个请求调 SDPA 与整批一次调，结果相同，时间却差好几倍（数字随机器而变；计时时只开一个线程，量的是调用本身）：

# %%
# NBVAL_IGNORE_OUTPUT
import dataclasses
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
# 逐请求路径要每个请求一个掩码；1 个 query 的掩码就是全 1
dm_loop = dataclasses.replace(dm, causal_masks=[causal_mask_bottom_right(1, n)
                                                for n in dm.seq_lens_k])
qd = randn(B, HQ, D)
kc, vc = dec_pool.k_cache(0), dec_pool.v_cache(0)


def timed(fn, repeat=20):
    fn()
    t0 = time.perf_counter()
    for _ in range(repeat):
        out = fn()
    return out, (time.perf_counter() - t0) / repeat * 1e3


threads = torch.get_num_threads()
torch.set_num_threads(1)
try:
    loop_out, loop_ms = timed(lambda: dec_backend._forward_per_request(qd, kc, vc, dm_loop))
    batched_out, batched_ms = timed(lambda: dec_backend._forward_single_query(qd, kc, vc, dm))
finally:
    torch.set_num_threads(threads)
assert torch.allclose(loop_out, batched_out, atol=1e-5)
print(f"{B} 个 decode 请求（key 数 {min(dm.seq_lens_k)}～{max(dm.seq_lens_k)}），一层：")
print(f"  逐个请求 {B} 次 SDPA：{loop_ms:.2f} ms")
print(f"  补齐后 1 次 SDPA   ：{batched_ms:.2f} ms")

# %% [markdown]
# 每次调用都有 Python 和算子派发的固定开销，prefill 的逐请求路径每层每个请求都要付一次。
#
# ??? note "深入：参考后端慢在哪三处，快的内核怎样换掉它们"
#
#     1. **逐个请求的循环。** 32 个请求、28 层的 prefill 就是 896 次小调用，请求越短越不划算。
#     2. **gather 是拷贝。** `index_select` 把散落在各页的 K/V 拷成连续的一段，GQA 的 `repeat_interleave` 再拷一份 `group` 倍大的。以 Qwen3-0.6B（28 层、8 个 KV 头、head_dim 128、bf16）为例，每个 token 的 K/V 是 28 × 2 × 8 × 128 × 2 字节 = 112 KiB，一个 4k 上下文的请求每步要读 448 MiB；参考后端在此之外还要写出 448 MiB 的 gather 副本和 896 MiB 的 GQA 副本再读回来，而 decode 是受带宽限制的。
#     3. **补齐白算。** 31 个 16 个 key 的请求和 1 个 4000 个 key 的请求补齐在一起，每层每头算 32 × 4000 = 128000 个分数，有用的只有 4496 个。
#
#     FlashAttention 的变长 / 分页接口和 FlashInfer 的分页 prefill、decode wrapper 一次内核调用算完整批：拿着每个请求的长度知道 query 在哪，在内核里直接按页表去各页读 K/V，不拷贝；GQA 按 `h // group` 读同一份 KV 头，不复制；各请求读各自的长度，不补齐；因果掩码由内核按位置生成。`prepare_metadata` 算的还是这几样东西，只是交给内核时换一种排布（计划中的第 17 章）。

# %% [markdown]
# ## 运行
#
# 把本章的 main 跑一遍（输出是在本章的树里真实跑出来的）：

# %%
run("python examples/ch05_attention.py")

# %% [markdown]
# 值得注意的地方：
#
# - 第一节 uid 1 的 `seq_lens_k` 比 `seq_lens_q` 多 5，就是它缓存的前缀；它的左上对齐掩码第一行只有一个 1。
# - 对 uid 1 用 `is_causal=True`，最大误差是 3.08，与注意力输出本身同一量级：等于全错。
# - decode 两步都是 `single_query=True`、因果掩码 0 个；`key_mask` 每步每行多一个 1，uid 1 那行全是 1，它决定补齐的宽度。
# - 朴素注意力的误差全都小于 1e-5，而 KV 池一开始填满了 NaN：没有一次读到没写过的槽位。
# - 三个长度 5、1、23 的提示一起 prefill、再 decode 五步，与 Hugging Face 全部一致。

# %% [markdown]
# ## 与上游的差异
#
# - 我们只有一个建在 SDPA 上的参考后端，[上游](../glossary.md#upstream)只有 GPU 内核后端（`attention/fa.py` · `FlashAttentionBackend`、`attention/fi.py` · `FlashInferBackend`），因为本书要在 CPU 上跑，也要一个给测试当参照的实现。
# - 我们的元数据是补齐的 `kv_indices` 加 `key_mask`，上游交给内核的是 `cu_seqlens_q/k` 和按页的表（`attention/fa.py` · `FlashAttentionBackend.prepare_metadata`），因为 SDPA 只认矩形的批次。
# - 我们的接口只有两个方法，上游的 `BaseAttnBackend` 还有 `init_capture_graph`、`prepare_for_capture`、`prepare_for_replay`（`attention/base.py` · `BaseAttnBackend`），因为参考后端在 CPU 上跑，没有 CUDA 图要录。
# - 我们按形状在一个后端内部选 prefill / decode 路径，上游用 `HybridBackend` 给两者各配一个后端（`attention/base.py` · `HybridBackend`），因为我们只有一个后端。
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 后端的接口和元数据：`python/minisgl/attention/base.py` · `BaseAttnMetadata`（第 12～15 行）、`python/minisgl/attention/base.py` · `BaseAttnBackend`（第 18～34 行）
# - prefill 和 decode 各用一个后端：`python/minisgl/attention/base.py` · `HybridBackend`（第 37～63 行）
# - 按名字创建后端：`python/minisgl/attention/__init__.py` · `create_attention_backend`（第 52～68 行）
# - FlashAttention：`python/minisgl/attention/fa.py` · `FlashAttentionBackend.prepare_metadata`（第 67～105 行）、`python/minisgl/attention/fa.py` · `FlashAttentionBackend.forward`（第 48～65 行）
# - FlashInfer：`python/minisgl/attention/fi.py` · `FlashInferBackend.prepare_metadata`（第 190～225 行）、`python/minisgl/attention/fi.py` · `FlashInferBackend.forward`（第 176～188 行）
# - 注意力层调后端：`python/minisgl/layers/attention.py` · `AttentionLayer.forward`（第 47～57 行）
# - 每一步准备元数据的地方：`python/minisgl/scheduler/scheduler.py` · `Scheduler._prepare_batch`（第 204～217 行）

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch05_attention.py`，不需要模型。参照是 float64 的朴素注意力，每条规则直接写出来，没有掩码、补齐和页表；KV 池先填满 NaN，页表填满 -1，读错一个槽位就当场暴露。每一步、每一层、每个请求都与参照逐元素比较：

# %% tags=["remove-input"]
listing("tests/test_ch05_attention.py", "World.step")

# %% [markdown]
# 它们覆盖变长 prefill、带缓存前缀的 prefill、中途有请求结束和加入的 decode、混合批次，三种头的配比（每个 KV 头对应 1、2、4 个 q 头）乘以 page_size 1 和 4；另有测试证明有缓存前缀时 `is_causal=True` 错、没有时对，以及 decode 不建因果掩码。在本章的树里跑全部：

# %%
run("python -m pytest -q --color=no tests/test_ch05_attention.py")

# %% [markdown]
# ## 怎么讲清楚
#
# 注意力后端是模型里唯一要知道“批里有谁”的地方。第一，接口分两步：`prepare_metadata` 每批一次，整理各请求的 query 数、key 数和从页表抄出的槽位，所有层共用；`forward` 每层一次，先把新 K/V 写进 KV 池再取，因为新 token 也是 key。第二，因果掩码按绝对位置右下对齐；SDPA 的 `is_causal=True` 贴着左上角，有缓存前缀就悄悄算错，本章的例子误差是 3.08。第三，decode 补齐成一批一次算完，补齐的列必须指向写过的槽位，因为掩码挡不住 NaN。

# %% [markdown]
# ## 练习
#
# 1. **滑动窗口。** 有的模型规定每个 token 只看最近的 W 个 token（含自己）。`causal_mask_bottom_right` 要怎么改？逐请求路径上还能省掉什么？
# 2. **一个长请求拖住一批短请求。** 一个 prefill 批里 31 个请求只剩最后 1 个 token 要算，另有 1 个请求有 2000 个新 token。这一批走哪条路径，每层调几次 SDPA？
# 3. **把 KV 池清零行不行？** 有人提议 KV 池改用 `torch.zeros` 分配，这样补齐的列指向哪里都不会有 NaN。这样做对吗？丢掉了什么？
# 4. **挑战：分组的 forward。** 改写 `forward`：把 `seq_lens_q == 1` 的请求合成一次批量调用，其余的逐个算，输出仍按原顺序；用本章的测试验证它，并量一量练习 2 那一批快了多少。
#
# ??? success "参考答案"
#
#     1. 在右下对齐的条件上加一个下界：`(k_pos <= q_pos) & (k_pos > q_pos - W)`，可见区域变成贴着右下角的一条斜带。请求最早的 query 在位置 `n_k - n_q`，比 `n_k - n_q - W + 1` 更早的 key 根本不必从池里取出来；decode 时只取最后 W 个。
#     2. 只要有一个请求不止 1 个 query，`single_query` 就是假，整批走逐请求路径：每层 32 次 SDPA，其中 31 次只算 1 个 query。
#     3. 对“不出 NaN”而言是对的，代价是启动时把整个 KV 池写一遍。丢掉的是可查性：KV 池填 NaN 时读错槽位当场暴露，清零后只会让结果“有点不对”；而且页表那一行 `device_len` 之后的列不一定是合法的槽位，夹住列号的那一步仍然要留着。
#     4. 在 `prepare_metadata` 里记下两组请求的下标和它们在 q 里的位置；`forward` 里 1 个 query 的那组用 `key_mask` 一次算完（不需要因果掩码），其余逐个算，再按下标写回一个 `[T, hq, d]` 的输出。练习 2 那一批每层从 32 次调用降到 2 次。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 15   # 把第 15 题的起始代码拷进工作区
# python practice/judge.py test 15    # 判题
# python practice/judge.py hint 15    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - 注意力后端是模型里唯一要知道“批里有谁”的地方：`prepare_metadata` 每批一次，`forward` 每层一次。
# - q 不补齐，K/V 按页表取回；`kv_indices` 里是槽位，页多大后端不用管。
# - 先 `store_kv` 再取 K/V：这一步的新 token 也是 key。
# - 因果掩码按绝对位置右下对齐；`is_causal=True` 贴着左上角，只在没有缓存前缀时才对。
# - decode 不建因果掩码，补齐成一批一次算完；补齐的列指向写过的槽位，因为掩码挡不住 NaN。
