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
# # 第 1 章 核心数据结构
#
# 第 0 章的最小引擎一次只服务一个提示：一个 `cache.length` 记住缓存到了哪，一个 `while` 循环一步步往后生成。真正的引擎同时服务几十上百个请求，它们提示长短不一、进度各不相同，有的刚进门，有的命中了前缀缓存只差几个 token，有的下一步就要结束。在写任何一行矩阵乘法之前，引擎得先能回答三个问题：每个请求走到哪一步了？这一步要把哪些 token 送进模型、它们各在序列的什么位置？模型深处的注意力层怎么知道这一批里有谁？minisgl 用四个小对象回答它们：`SamplingParams` 记下请求想怎么挑 token，`Req` 用几个整数给请求的进度记账，`Batch` 把一步要算的请求拼在一起，`Context` 在前向期间把当前批次交给模型的各层。本章只写这些数据结构，外加环境变量和几个整数小工具，不碰模型也不碰 GPU；可后面的调度器、KV 池、注意力后端全都站在这几个整数上——这里差一位，后面就是写错槽位的 K/V 和一串乱码。

# %% tags=["remove-cell"]
from minibook.page import *
_ = setup(1)  # 赋值而不显示：返回的树路径随机器而变

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 一个请求的提示有 10 个 token，其中前 4 个命中了前缀缓存，`output_len = 3`。刚创建时 `cached_len`、`device_len`、`extend_len`、`remain_len`、`max_device_len` 各是多少？这一步送进模型的 positions 是什么？
# 2. 请求生成满 `output_len` 个 token、结束的那一刻，`cached_len` 和 `device_len` 差几？为什么不相等？
# 3. 就算整段提示都在前缀缓存里，构造 `Req` 时也要求 `cached_len < len(input_ids)`。为什么？
# 4. 模型的 `forward()` 不带任何参数，注意力层怎么拿到这一批的 positions 和各请求的长度？`forward_batch` 为什么拒绝嵌套，又为什么要在 `finally` 里清掉批次？
# 5. Qwen3-0.6B 有 16 个 query 头、8 个 KV 头。TP=16 时，`div_even` 给每个 rank 分几个 KV 头？TP=3 呢？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. `cached_len = 4`，`device_len = 10`，`extend_len = 6`，`remain_len = 3`，`max_device_len = 13`；positions 是 `[4, 5, 6, 7, 8, 9]`——从 `cached_len` 开始，不从 0 开始。
#     2. 差 1。每一步 `complete_one()` 都让 `cached_len` 追上旧的 `device_len`，再把 `device_len` 加 1（新采样的 token）。最后一步采样出的 token 让 `remain_len` 归零，请求就此结束，这个 token 再也不会被送进模型，它的 K/V 从没写进 KV 池，所以 `cached_len` 永远停在 `device_len - 1`。
#     3. 下一个 token 来自这一步**最后一个位置**的 logits。`cached_len == len(input_ids)` 意味着这一步一个 token 都不用算，也就没有 logits 可采样。所以前缀缓存匹配时最多只认前 `len - 1` 个 token，至少留最后一个提示 token 重新算一遍。
#     4. 通过全局的 `Context`：引擎在 `with ctx.forward_batch(batch):` 里调 `model.forward()`，注意力层用 `get_global_ctx().batch` 读当前批次。一个进程同一时刻只有一个批次在前向，嵌套说明调用出了错，静默覆盖只会让层读到错的批次；`finally` 保证前向中途抛异常时批次也被清掉，下一次前向不会读到上一批的残留。
#     5. TP=16：8 个 KV 头不够分，`div_even(8, 16, allow_replicate=True)` 返回 1——每个 rank 放 1 个，每个头复制到 2 个 rank 上。TP=3：16 个 query 头本身就不能被 3 整除，`div_even(16, 3)` 直接报错，这个 TP 数不可用。

# %% [markdown]
# ## 本章要回顾的文件
#
# 这是 `minisgl` 包的第一章：包的骨架、`core.py`、`env.py` 和 `utils/` 都从这里开始，下面每个文件都是本章新建的。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch01_core.py`。它不加载模型，用一个“假模型”（把每个请求最后一个 token 加 1 当作下一个 token）走完请求的一生：三个请求的初始记账、一个请求从 prefill 到生成满、三个请求拼成一批（其中一个命中了前缀缓存）一起 decode、`Context` 的守卫，最后是 `SamplingParams`、`div_even` 和环境变量的报错。它只用到上面这棵树里的文件；`python tools/steps.py check` 会逐章搭出这棵树、跑这个 main 和树里的全部检查。只想跑这一个 main，可以：
#
# ```bash
# python tools/steps.py run 1 -- python examples/ch01_core.py
# ```
#
# 假模型和真模型一样，`forward` 不带参数，从全局上下文读当前批次；一步前向之后，每个请求前进一步：

# %% tags=["remove-input"]
listing("examples/ch01_core.py", "fake_model_forward")

# %% tags=["remove-input"]
listing("examples/ch01_core.py", "run_one_step")

# %% [markdown]
# `run_one_step` 的顺序就是真实引擎一步的顺序：进入上下文、前向、每个请求 `complete_one()`、新 token 拷回 CPU 后 `append_host()`。本章剩下的内容，就是把这四步里每个名字讲清楚。
#
# ## 一张图：三段长度，和一批怎么拼
#
# ![上半：一个请求在 prefill 和三次 decode 中三段区间的变化；下半：三个请求这一步要算的 token 首尾相接成 Batch 的 input_ids 和 positions](../assets/ch01_req_lifecycle.svg)
#
# 上半张图是一个请求的一生，每一行是一次前向**开始时**的样子。一个请求的 token 序列按下标切成三段左闭右开的区间：
#
# | 区间 | 含义 | 长度 |
# | --- | --- | --- |
# | `[0, cached_len)` | K/V 已经写在 KV 池里，这一步只读不算 | `cached_len` |
# | `[cached_len, device_len)` | 这一步要送进模型的 token | `extend_len = device_len - cached_len` |
# | `[device_len, max_device_len)` | 还没生成、但已经预留了名额 | `remain_len = max_device_len - device_len` |
#
# prefill 时橙色段是整段提示（命中前缀缓存的那部分除外）；之后每次 decode，橙色段都只有 1 格，并且整体右移一格。最后一行的紫色斜线格是最后一次采样出的 token：名额用完，它只被追加到 `input_ids`，从没被送进模型。
#
# 下半张图是一个 prefill 批。每个请求只贡献自己的橙色段，按顺序首尾相接，拼成一维的 `input_ids`；`positions` 与之一一对应，每段是 `arange(cached_len, device_len)`。请求 2 的前 5 个 token 命中了缓存，所以它这一段的位置从 5 开始——位置告诉 RoPE“这个 token 在它自己的序列里排第几”，跟它在拼接后的大数组里排第几无关。

# %% [markdown]
# ## Req：一个请求就是几条长度
#
# 调度器眼里的请求不是一段文本，而是一行 token id 加上几个整数：

# %% tags=["remove-input"]
listing("minisgl/core.py", "Req")

# %% [markdown]
# 构造时给的字段里，真正参与记账的只有 `input_ids`、`cached_len`、`output_len` 三个；`table_idx`（页表里的行号，第 4 章）、`uid`（把结果送回哪个用户，第 12 章）、`cache_handle`（前缀缓存命中部分的句柄，第 8、9 章）现在只是占位，先记住它们属于请求本身。`device_len` 和 `max_device_len` 是 `field(init=False)`：它们由 `__post_init__` 从提示长度推出来，不让调用方自己填，少一个填错的机会。`extend_len`、`remain_len`、`can_decode` 是 `@property`，每次现算，不存成会过期的数字。
#
# `device_len` 这个名字值得多看一眼：它是“**设备上**已知的 token 数”，不是 `len(input_ids)`。新 token 先在设备上采样出来，写进设备上的 token 池，下一步前向直接从那里取；拷回 CPU、追加到 `input_ids` 是另一件事，可以晚一点发生（下面 `append_host` 一节）。所以记账以设备为准。
#
# !!! note "和第 0 章对一下"
#     第 0 章 `forward` 里的 `cache.length` 就是这里的 `cached_len`，`positions = arange(cache.length, cache.length + n)` 就是 `arange(cached_len, device_len)`。区别只在于：那里只有一个请求，一个整数就够；这里每个请求一份，并且多了“命中前缀缓存时一开始就不为 0”和“最多生成多少”两件事。
#
# ### 构造时就把错挡住
#
# `__post_init__` 检查三件事：`input_ids` 是 CPU 上的一维 int32 张量（它要和设备上的 int32 token 池互相拷贝；混进一个 int64，`torch.cat` 会把拼接结果悄悄提升成 int64，每次拷贝都多一次转换），`output_len ≥ 1`，以及最要紧的 `0 ≤ cached_len < len(input_ids)`。后一个条件的右半边不是随手写的：下一个 token 来自这一步最后一个位置的 logits，`cached_len` 等于提示长度就意味着这一步没有 token 可算、也就没有 logits。哪怕整段提示都在前缀缓存里，也得留最后一个 token 重算一遍：

# %%
import torch
from minisgl.core import Req, SamplingParams


def make_req(prompt, output_len, cached_len=0, uid=0, dtype=torch.int32):
    return Req(input_ids=torch.tensor(prompt, dtype=dtype), table_idx=uid, cached_len=cached_len,
               output_len=output_len, uid=uid, sampling_params=SamplingParams(max_tokens=output_len),
               cache_handle=None)


for bad in (dict(cached_len=3), dict(cached_len=-1), dict(dtype=torch.int64)):
    try:
        make_req([1, 2, 3], 2, **bad)
        raise AssertionError("应该被拒绝")
    except ValueError as e:
        print(f"{bad} → {e}")

ok = make_req([1, 2, 3], 2, cached_len=2)  # 缓存了 2 个，还剩 1 个要算：可以
assert ok.extend_len == 1

# %% [markdown]
# ### complete_one：一步前向之后
#
# 一次前向结束，对这一批的每个请求调用一次 `complete_one()`，它只有两行：先 `cached_len = device_len`（这一步送进去的 token，K/V 都写进了 KV 池），再 `device_len += 1`（从最后一个位置的 logits 采样出了一个新 token）。两行的顺序不能反：反过来，`cached_len` 就把一个还没进缓存的 token 也算了进去。
#
# 从这两行能推出整个生命周期的规律：第一次调用之后 `extend_len` 恒为 1（decode 每步只算 1 个 token），`remain_len` 每步减 1，减到 0 时 `can_decode` 为假。prefill 和 decode 用的是**同一套公式**，区别只在第一步的 `extend_len` 是多少。下面这个请求有 6 个 token 的提示，前 4 个命中了缓存，最多生成 3 个：

# %%
req = make_req([5, 6, 7, 8, 9, 10], output_len=3, cached_len=4)
def lengths(r):
    return (f"cached_len={r.cached_len} device_len={r.device_len} "
            f"extend_len={r.extend_len} remain_len={r.remain_len}")


print(f"创建时               {lengths(req)}")
step = 0
while req.can_decode:
    positions = list(range(req.cached_len, req.device_len))  # 这一步要算的位置
    new_token = 100 + step  # 假装这是采样出来的
    req.complete_one()
    req.append_host(new_token)
    step += 1
    print(f"第 {step} 步算了 {positions!s:<7}→ {lengths(req)}")

assert step == 3 and req.input_ids.tolist() == [5, 6, 7, 8, 9, 10, 100, 101, 102]
assert req.cached_len == req.device_len - 1 == req.max_device_len - 1

# %% [markdown]
# 第一步算了 2 个位置 `[4, 5]`，之后每步 1 个。结束时 `cached_len = 8`、`device_len = 9`：最后那个 `102` 采样出来请求就满了，它没有下一步，K/V 永远不会进池。这不是 bug，而是记账如实反映了“最后一个 token 从没进过模型”这件事；第 8 章把请求的 KV 交还给前缀缓存时，交的正是 `[0, cached_len)` 这段，不多不少。
#
# 生成满之后再调 `complete_one()` 会报错：`remain_len` 为 0 时前进一步，`device_len` 就越过了 `max_device_len`，页表那一行（第 4 章按 `max_device_len` 分配）就要写出界了。
#
# !!! note "遇到 EOS 而结束不在这里"
#     `can_decode` 只看长度。生成出 EOS 而提前结束，要看 `sampling_params.ignore_eos` 和分词器的 EOS id，那是调度器（第 7 章）处理输出时的判断，`Req` 不知道什么是 EOS。
#
# ### append_host：CPU 上的 token 可以落后，不能超前
#
# `append_host` 把新 token 追加到 CPU 上的 `input_ids`。它不要求 `len(input_ids) == device_len`，只要求前者**小于**后者才能追加。原因在第 11 章的重叠调度：GPU 算第 k 步的同时，CPU 已经在准备第 k+1 步，第 k 步的 token 还在从设备拷回的路上。第 k+1 步的输入直接从设备上的 token 池取，用不着等 CPU；于是一个请求可能已经 `complete_one()` 了两次，第一次的结果才拷回来。反过来，CPU 上的 token 比 `device_len` 还多是不可能的——那意味着多出一个设备上都没生成过的 token，只能是调用顺序错了：

# %%
req = make_req([1, 2, 3, 4], output_len=5)
req.complete_one()  # 第 1 步前向完成（token 还在拷回 CPU 的路上）
req.complete_one()  # 重叠调度：第 2 步也已经完成
print(f"len(input_ids) = {len(req.input_ids)}，device_len = {req.device_len}：落后 2 个，允许")
req.append_host(11)  # 第 1 步的结果到了
req.append_host(torch.tensor(12, dtype=torch.int64))  # 第 2 步的结果，0 维 int64 也收，存成 int32
print(f"len(input_ids) = {len(req.input_ids)}，device_len = {req.device_len}：追上了")
try:
    req.append_host(13)
    raise AssertionError("应该被拒绝")
except RuntimeError as e:
    print(f"再追加一个 →\n  {e}")
assert req.input_ids.dtype == torch.int32 and req.input_ids[-2:].tolist() == [11, 12]

# %% [markdown]
# ### eq=False：请求按身份比较
#
# `Req` 的装饰器是 `@dataclass(eq=False, kw_only=True)`。`dataclass` 默认会生成按字段比较的 `__eq__`，并因此把 `__hash__` 设为 `None`——请求就放不进 `set`，也当不了 `dict` 的键。调度器恰恰要用集合记住“这一轮结束的请求”“等待释放的请求”；而两个提示一模一样、参数也一样的请求，依然是两个用户的两次请求，不能被当成一个。所以请求按对象身份比较和哈希。`kw_only=True` 则让七个构造参数只能按名字传：`cached_len` 和 `output_len` 都是整数，按位置传错了不会有任何报错。

# %%
a, b = make_req([1, 2, 3], 2), make_req([1, 2, 3], 2)
print(f"a == b: {a == b}，len({{a, b}}) = {len({a, b})}，a in {{a}}: {a in {a}}")
assert a != b and len({a, b}) == 2

# %% [markdown]
# ## Batch：一次前向要算的一组请求

# %% tags=["remove-input"]
listing("minisgl/core.py", "Batch")

# %% [markdown]
# 创建一个 `Batch` 只需要两样东西：请求列表和阶段。prefill 和 decode 分开成批，因为两者的形状完全不同：
#
# === "prefill 批"
#
#     每个请求贡献 `extend_len` 个 token，长短不一，从几个到几千个；`positions` 的每一段从各自的 `cached_len` 开始。注意力要对每个请求做“新 token 看见缓存的前缀和自己之前的新 token”的因果注意力。这一步是**算力**密集的：一次矩阵乘里有成百上千行。
#
# === "decode 批"
#
#     每个请求恰好贡献 1 个 token，位置是 `device_len - 1`；`input_ids` 的长度就等于请求数。注意力是 1 个 query 对整段缓存。这一步是**带宽**密集的：每个 token 要把全部权重和这个请求的整段 K/V 读一遍，所以要把尽量多的请求拼进同一步（第 7 章的连续批处理），第 18 章还会把请求数补齐到固定档位，好重放录好的图。
#
# 其余字段——`input_ids`、`positions`、`out_loc`、`padded_reqs`、`attn_metadata`——创建时都还没有，要等调度器和注意力后端在前向之前填好。`padded_reqs` 是补齐后的请求列表：图捕获要求批大小是几个固定档位之一，不够就补占位请求；`size` 是真实请求数，`padded_size` 是补齐后的数目，采样和回写结果只看前 `size` 个。
#
# 下面手工做一次调度器的活：把三个请求拼成一个 prefill 批，第三个命中了 5 个 token 的前缀缓存。

# %%
from minisgl.core import Batch

reqs = [make_req([11, 12, 13], 4, uid=0), make_req([21, 22], 2, uid=1),
        make_req([41, 42, 43, 44, 45, 46, 47, 48], 3, cached_len=5, uid=2)]
batch = Batch(reqs=reqs, phase="prefill")
batch.padded_reqs = batch.reqs  # 不补齐
batch.input_ids = torch.cat([r.input_ids[r.cached_len:r.device_len] for r in batch.padded_reqs])
batch.positions = torch.cat([torch.arange(r.cached_len, r.device_len, dtype=torch.int32)
                             for r in batch.padded_reqs])
print(batch)
print("input_ids:", batch.input_ids.tolist())
print("positions:", batch.positions.tolist())
assert len(batch.input_ids) == len(batch.positions) == sum(r.extend_len for r in reqs) == 8
assert batch.positions.tolist() == [0, 1, 2, 0, 1, 5, 6, 7]

# %% [markdown]
# 拼出来的就是图里下半张的两行。注意力层拿到的是一条一维的长序列，它要知道“哪几个 token 属于同一个请求”，通常用长度的前缀和 `cu_seqlens = [0, 3, 5, 8]` 表示：第 i 个请求占 `[cu[i], cu[i+1])`。这由注意力后端的 `prepare_metadata` 从 `padded_reqs` 算出来，放进 `attn_metadata`（第 5 章）。
#
# ### SetLater：字段由谁来填
#
# `input_ids` 这些“稍后才有”的字段没写成 `field(init=False)`，而是一个小小的描述符 `SetLater`：

# %% tags=["remove-input"]
listing("minisgl/core.py", "SetLater")

# %% [markdown]
# 它做的事很朴素：值存在实例的 `__dict__` 里，读的时候没有就抛 `AttributeError`，消息里写明这是什么、由谁在什么时候填。和 `field(init=False)` 相比，读到没填的字段时一样会报错，区别在于报错说了什么。假设你在第 5 章写注意力后端时忘了在调度器里设 `out_loc`，你会在几层调用之外看到这样一句话，而不是一个光秃秃的属性名：

# %%
fresh = Batch(reqs=[make_req([1, 2, 3], 1)], phase="prefill")
for name in ("out_loc", "attn_metadata"):
    try:
        getattr(fresh, name)
        raise AssertionError("应该报错")
    except AttributeError as e:
        print(e)
print("padded_reqs 填了吗？", hasattr(fresh, "padded_reqs"))
assert not hasattr(fresh, "padded_reqs")

# %% [markdown]
# 抛的是 `AttributeError` 而不是别的异常，这一点是有意的：`hasattr` 和 `getattr(obj, name, default)` 都靠它判断“没有这个属性”，换成 `RuntimeError` 它们就坏了。`Context` 上 Engine 装的几样东西（页表、KV 池、注意力后端、MoE 后端）也用同一个描述符声明，第 6 章的 Engine 把它们一一装上。
#
# ## Context：前向期间的“当前批次”
#
# 现在回到开头的第三个问题。一个 decoder 模型是一棵层的树：`Model → DecoderLayer × N → Attention → AttentionLayer`。这棵树里几乎所有层——线性层、RMSNorm、激活函数——只需要上一层的输出张量；只有注意力层（以及 MoE 层）还要知道这一批的 positions、每个请求的长度、K/V 该写进 KV 池的哪些槽位。如果把 `batch` 作为参数一路传下去，每一层的 `forward` 签名都得多一个它自己根本不用的参数。minisgl 的做法是：模型的 `forward()` 不带参数，批次挂在一个进程级的 `Context` 上，需要它的层自己去取。

# %% tags=["remove-input"]
listing("minisgl/core.py", "Context.batch")

# %% tags=["remove-input"]
listing("minisgl/core.py", "Context.forward_batch")

# %% [markdown]
# 全局变量的老毛病是“不知道谁在什么时候改了它”。`forward_batch` 用三条规矩把它关进笼子：
#
# 1. **只在 `with` 块里有**：`ctx.batch` 在块外读会报错，说明要去哪里读——不会读到 `None`，也不会读到上一批。
# 2. **拒绝嵌套**：一个进程同一时刻只有一批在前向；已有批次时再进 `forward_batch` 一定是调用写错了。检查放在 `try` 之外：被拒绝的内层不会进入 `finally`，因此不会顺手把外层的批次清掉。
# 3. **`finally` 里清空**：前向中途抛异常（比如显存不够）也一样清掉，调度器捕获异常后可以接着调度下一批。

# %%
from minisgl.core import Context, get_global_ctx, set_global_ctx

ctx = Context(page_size=1)
set_global_ctx(ctx)


def attention_layer_positions():  # 模型深处的一层：没有 batch 参数，自己去取
    return get_global_ctx().batch.positions.tolist()


try:
    attention_layer_positions()
except RuntimeError as e:
    print("块外：", e)

with ctx.forward_batch(batch):
    print("块内：", attention_layer_positions())
    try:
        with ctx.forward_batch(fresh):
            pass
    except RuntimeError as e:
        print("嵌套：\n ", e)
    assert ctx.batch is batch  # 被拒绝的内层没有清掉外层

try:
    with ctx.forward_batch(batch):
        raise MemoryError("假装显存不够")
except MemoryError:
    pass
print("出异常之后：", ctx)
assert repr(ctx) == "Context(page_size=1, batch=None)"

# %% [markdown]
# `set_global_ctx` / `get_global_ctx` 是一对最简单的登记函数：Engine 创建时登记自己的 `Context`，层通过 `get_global_ctx()` 取。我们允许新登记的替换旧的（以及传 `None` 清除），因为本书的 notebook 和检查会在同一个进程里先后创建好几个 Engine；但同一时刻仍然只有一个生效。

# %% tags=["remove-input"]
listing("minisgl/core.py", "get_global_ctx")

# %% [markdown]
# !!! tip "page_size 为什么放在 Context 上"
#     `Context(page_size)` 是唯一一个构造时就要给的参数：KV 池按页分配（第 4 章），注意力后端要按页组织元数据，它们都从 `ctx.page_size` 读同一个数。页表 `page_table` 却始终按 token 记槽位（相当于页大小为 1），这样不管页多大，“第 i 个请求的第 j 个 token 的 K/V 在哪”都是 `page_table[table_idx, j]` 一次查表。
#
# ## SamplingParams：坏参数在门口拦住

# %% tags=["remove-input"]
listing("minisgl/core.py", "SamplingParams")

# %% [markdown]
# 五个字段的默认值合起来就是“贪心、最多 1024 个 token”。`__post_init__` 里的校验看起来啰嗦，但它挡住的是一类特别难查的错。采样的公式是 `softmax(logits / temperature)`，再按 top-k、top-p 截断（第 6 章）；照着公式直接算，坏参数不会报错，只会悄悄变成 `nan`：

# %%
logits = torch.tensor([2.0, 1.0, 0.5])
print("temperature = 0 硬除：", torch.softmax(logits / 0.0, dim=-1).tolist())
print("top_p = 0 一个都不留：", torch.softmax(torch.full((3,), float("-inf")), dim=-1).tolist())
for bad in (dict(temperature=-0.5), dict(top_p=0.0), dict(top_k=0), dict(max_tokens=True)):
    try:
        SamplingParams(**bad)
        raise AssertionError("应该被拒绝")
    except ValueError as e:
        print(f"SamplingParams(**{bad}) → {e}")

# %% [markdown]
# 一个带 `nan` 的分布交给 `torch.multinomial` 要么直接报错，要么采出一个无意义的 token——而且发生在调度器的循环里，离用户传参的地方隔着好几个进程。所以参数在构造 `SamplingParams` 时就检查，服务层（第 15 章）可以把这个 `ValueError` 原样变成一个 400 响应，坏请求根本进不了引擎。`max_tokens=True` 被拒绝是因为 `bool` 是 `int` 的子类，`True` 会被当成 1 悄悄放行。
#
# `temperature = 0` 本身是合法的，它表示贪心，只是不能拿去做除数：采样器先看 `is_greedy`，是贪心就走 argmax 的分支。

# %%
for kw in (dict(), dict(top_p=0.5), dict(temperature=0.8, top_k=1), dict(temperature=0.8, top_p=0.9)):
    p = SamplingParams(**kw)
    print(f"temperature={p.temperature}, top_k={p.top_k}, top_p={p.top_p} → is_greedy={p.is_greedy}")
assert SamplingParams(top_p=0.5).is_greedy and not SamplingParams(temperature=0.8).is_greedy

# %% [markdown]
# 我们的 `is_greedy` 只要求“温度为 0，或者 top-k 为 1”，不管 `top_p`。道理是：top-p 截断总会保留概率最大的那个 token，所以 top-k = 1 时再加 top-p 也只剩第一名；温度为 0 时分布退化成 argmax，截断与否都一样。结果与每步取 argmax 完全相同，那就该走更快、也确定的 argmax 分支。
#
# ## env：现读现解析，写错就报错
#
# 引擎有一些不适合做成命令行参数的开关：日志级别、是否关掉重叠调度、每个进程用几个 CPU 线程……它们通过 `MINISGL_` 开头的环境变量设置。`env.py` 把每个变量写成一个描述符 `EnvVar`，类属性名加上前缀就是变量名：

# %% tags=["remove-input"]
listing("minisgl/env.py", "EnvVar.read")

# %% tags=["remove-input"]
listing("minisgl/env.py", "Env")

# %% [markdown]
# 有两个设计选择，都和“悄悄”过不去：
#
# - **每次读都现读**。`ENV.CPU_THREADS` 不是导入时存下的快照，而是每次访问都去读 `os.environ`。启动器（第 15 章）会在拉起每个 TP rank 的子进程前改环境变量，在 notebook 里做实验时也常临时改；现读现解析，读到的永远是当前值。
# - **写错就报错**。`MINISGL_DISABLE_OVERLAP_SCHEDULING=ture` 这样的手误，如果悄悄退回默认值，你会以为关掉了重叠调度、然后困惑于为什么什么都没变。这里它会抛 `EnvError`，说清楚是哪个变量、写了什么、应该写什么、默认值是什么。`Env.as_dict()` 一次读全部，引擎启动时调用一次，就能把配置错误挡在真正开始干活之前。

# %%
import os
from minisgl.env import ENV, EnvError

name = "MINISGL_DISABLE_OVERLAP_SCHEDULING"
saved = os.environ.pop(name, None)  # 先清掉，演示完再恢复
try:
    print("不设置：", ENV.DISABLE_OVERLAP_SCHEDULING)
    os.environ[name] = "on"
    print("设成 on：", ENV.DISABLE_OVERLAP_SCHEDULING)  # 不用重新导入，马上读到新值
    os.environ[name] = "ture"
    try:
        ENV.DISABLE_OVERLAP_SCHEDULING
        raise AssertionError("应该报错")
    except EnvError as e:
        print("设成 ture：\n ", e)
    os.environ[name] = "0"
    assert ENV.DISABLE_OVERLAP_SCHEDULING is False
finally:
    os.environ.pop(name, None)
    if saved is not None:
        os.environ[name] = saved

# %% [markdown]
# ## utils：给整数运算起名字
#
# `minisgl/utils/` 里是各处共用的小工具。`math.py` 的四个函数——`div_even`、`div_ceil`、`align_ceil`、`align_down`——都是一行就能写完的整数运算，单独起名字是为了出错时能说清是哪两个数、为什么不行。最值得看的是 `div_even`：

# %% tags=["remove-input"]
listing("minisgl/utils/math.py", "div_even")

# %% [markdown]
# 它是张量并行切权重的地基（第 16 章）：query 头、MLP 中间维、词表都要平均分给 `tp_size` 个 rank，分不匀就该在建模型时报错，而不是等到矩阵乘形状对不上。`allow_replicate=True` 是专给 KV 头留的口子：GQA 模型的 KV 头常常比 rank 还少，这时每个 rank 放 1 个 KV 头，每个头复制到 `b // a` 个 rank 上。用 Qwen3-0.6B 的头数看一遍：

# %%
from minisgl.utils import div_even

print(f"{'TP':>3}  {'每个 rank 的 q 头':<14}  每个 rank 的 KV 头")
for tp in (1, 2, 4, 8, 16):
    q = div_even(16, tp)
    kv = div_even(8, tp, allow_replicate=True)
    note = f"（每个 KV 头复制 {tp // 8} 份）" if tp > 8 else ""
    print(f"{tp:>3}  {q:<18}  {kv}{note}")
for tp in (3, 32):
    try:
        div_even(16, tp)
        div_even(8, tp, allow_replicate=True)
    except ValueError as e:
        print(f"TP={tp}：{e}")
assert div_even(8, 16, allow_replicate=True) == 1 and div_even(8, 2, allow_replicate=True) == 4

# %% [markdown]
# TP=32 时 query 头也不够分了（16 个头分不成 32 份），`div_even(16, 32)` 不允许复制，直接报错——只有 KV 头能复制，query 头复制了就等于两个 rank 算同一份注意力输出。`div_ceil` 和两个 `align_*` 在第 4 章按页分配 KV 池时用：装下 `n` 个 token 需要 `div_ceil(n, page_size)` 页。
#
# `misc.py` 里是和设备、dtype 相关的几个函数：`is_cuda` 只解析设备名、不初始化 CUDA，没有 GPU 的机器上也能放心调用；`torch_dtype` 在 `with` 块里临时改默认浮点类型，建模型时权重直接以目标精度分配。`logger.py` 给日志加上 rank 前缀：张量并行时每个 rank 一个进程，日志混在同一个终端里，每行带上 `rank N` 才分得清是谁说的；“模型加载完成”这种每个 rank 都一样的话，用 `info_rank0` 只让 rank 0 说一次。

# %% tags=["remove-input"]
listing("minisgl/utils/logger.py", "RankLogger")

# %% [markdown]
# ## 运行
#
# 把本章的 main 跑一遍（输出就是在本章的树里真实跑出来的）：

# %%
run("python examples/ch01_core.py")

# %% [markdown]
# 值得注意的地方：
#
# - **第一节**：刚创建的请求 `cached_len = 0`，`extend_len` 等于提示长度，`remain_len` 等于 `output_len`，`max_device_len` 是两者之和——提示多长、能生成多少，在进门那一刻就定了。
# - **第二节**：`这一步算的位置` 一列，prefill 是 `[0, 1, 2]`，之后每步只有一个位置，且正好是上一步的 `device_len - 1`；`remain_len` 从 4 减到 0，恰好 4 步、4 个新 token。最后一行 `cached_len = 6`、`device_len = 7`，差的那一个就是图里紫色斜线格的 17。
# - **第三节**：请求 2 命中了 5 个 token 的缓存，它在 `positions` 里那段是 `5, 6, 7`。decode 第 1 步三个请求的位置是 `[3, 2, 8]`——各自的 `device_len - 1`，毫不相干。请求 1 只能生成 2 个，第 1 步之后就离开了批次；批次一步比一步小，这正是连续批处理（第 7 章）要利用的空档：空出来的位置可以塞进新请求。
# - **第四节**：嵌套的报错里外层和内层的 repr 一样，因为 main 拿同一个批次去嵌套；被拒绝之后外层还在，异常之后 `batch=None`。
# - **第五节**：`temperature=0.7, top_k=1` 也是贪心；`MINISGL_CPU_THREADS=0` 的报错给出了变量名、收到的值、合法的写法和默认值，四样都在。

# %% [markdown]
# ## 与官方的差异
#
# 数据结构的名字、字段和语义都与上游 mini-sglang 一致（读完本书去读上游，不需要重新认识 `Req`），差别集中在“错了怎么办”上：
#
# - **检查用异常，不用 `assert`**。上游在 `Req.__post_init__`、`Context.forward_batch`、`div_even` 里用 `assert` 做检查，`python -O` 会把它们整个去掉；我们抛 `ValueError` / `RuntimeError`，消息用中文写明收到了什么。上游的 `SamplingParams` 不做校验，坏值由采样器兜底：`Sampler.prepare` 把温度和 top_p 都夹到不小于 `1e-6`，于是 `temperature=-1` 会被悄悄当成“温度极低”，近似贪心，而不是报错。
# - **`is_greedy` 的条件**。上游要求“（温度 ≤ 0 或 top_k == 1）并且 top_p == 1”；我们去掉了 `top_p` 的条件，理由见上文：top-p 截断总保留第一名，不影响 argmax 的结果。
# - **`Req` 的构造参数只能按名字传**（`kw_only=True`），`append_host` 接受 `int` 或单元素张量并检查“不能超前”；上游的 `append_host` 直接把传入的张量拼上去，不做检查。上游 `Req` 的 repr 里没有 `uid`。
# - **稍后才填的字段**。上游的 `Batch` 和 `Context` 是普通 `dataclass`，后填的字段写成 `field(init=False)`，没填就读只会得到一个不带解释的 `AttributeError`；我们用 `SetLater` 写明由谁来填。
# - **全局上下文只能登记一次**：上游 `set_global_ctx` 断言之前没有登记过；我们允许替换和清除，方便在一个进程里先后创建多个 Engine。
# - **环境变量**。上游的 `EnvClassSingleton` 在导入时把所有变量读一次，解析失败就悄悄保留默认值，布尔值只认 `1/true/yes`（写 `on` 会被当成假）；我们每次访问现读、写错就抛 `EnvError`。变量表也不同：我们没有搬上游那几个 GPU 专用的开关（FlashInfer、PyNCCL 缓冲区大小等），多了 `LOG_LEVEL` 和 CPU 上用的 `CPU_THREADS`。
# - **utils 的组织**。上游的 `div_even` 等在 `utils/misc.py`，`utils` 里还有 ZMQ 队列、Hugging Face 下载、GPU 架构检测等；我们的整数工具单独放在 `utils/math.py`，其余工具放到用得上它们的章节再引入。
#
# ### 官方实现
#
# 上游仓库 `sgl-project/mini-sglang`：
#
# - 数据结构：`python/minisgl/core.py` · `SamplingParams`、`Req`、`Batch`、`Context`、`set_global_ctx` / `get_global_ctx`
# - 环境变量：`python/minisgl/env.py` · `EnvVar`、`EnvClassSingleton`（模块级的 `ENV`）
# - 整数工具：`python/minisgl/utils/misc.py` · `div_even`、`div_ceil`、`align_ceil`、`align_down`
# - 谁在用它们：`python/minisgl/engine/engine.py` · `Engine.forward_batch`（在 `ctx.forward_batch` 里调 `model.forward()`，之后对每个请求 `complete_one()`）；`python/minisgl/layers/attention.py` · `AttentionLayer.forward`（从 `get_global_ctx().batch` 读 positions）；`python/minisgl/scheduler/scheduler.py` · `_make_positions`（每个请求 `arange(cached_len, device_len)`）与 `Scheduler._process_last_data`（等拷回完成后才 `append_host`）；`python/minisgl/scheduler/cache.py` · `CacheManager.match_req`（只拿提示的前 `len - 1` 个 token 去匹配前缀，保证 `cached_len < len(input_ids)`）；`python/minisgl/engine/sample.py` · `Sampler.prepare`（全批都是贪心才走 argmax，否则把温度、top_p 夹到不小于 `1e-6`）

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch01_core.py`，不需要模型，几秒跑完。挑三个最能说明问题的看。
#
# 第一个在 20 组随机的（提示长度、缓存命中长度、输出长度）上走完请求的一生，每一步都核对三段区间：算过的位置恰好是 `[0, cached_len)`，CPU 上的 token 恰好 `device_len` 个，`cached_len` 比 `device_len` 少 1，步数正好是 `output_len`，生成满以后再前进会报错：

# %% tags=["remove-input"]
listing("tests/test_ch01_core.py", "test_whole_lifetime_bookkeeping")

# %% [markdown]
# 第二个把重叠调度下“落后可以、超前不行”的规矩钉死：两次 `complete_one()` 之后再补两次 `append_host()` 是合法的，多一次就报错；一次追加两个 token 也报错。

# %% tags=["remove-input"]
listing("tests/test_ch01_core.py", "test_append_host_may_lag_behind_but_never_overtake")

# %% [markdown]
# 第三个检查 `Context` 的守卫里最容易写错的那一处：嵌套被拒绝之后，外层的批次必须还在。把检查挪进 `try` 里，这个测试就会失败。

# %% tags=["remove-input"]
listing("tests/test_ch01_core.py", "test_context_refuses_nesting_and_keeps_outer_batch")

# %% [markdown]
# 其余测试覆盖 `SamplingParams` 的每一种坏参数、`SetLater` 的报错、异常之后 `Context` 可以继续用、`div_even` 在随机输入上与整除一致、环境变量的现读与报错、日志的 rank 前缀。在本章的树里跑全部：

# %%
run("python -m pytest -q --color=no tests/test_ch01_core.py")

# %% [markdown]
# ## 怎么讲清楚
#
# 推理引擎里一个请求就是一行 token 加三个整数：`cached_len`、`device_len`、`max_device_len`，把序列切成三段——`[0, cached_len)` 的 K/V 已在 KV 池，`[cached_len, device_len)` 是这一步要算的，`[device_len, max_device_len)` 是还能生成的名额。prefill 和 decode 用同一套公式：每步前向之后 `cached_len = device_len`、`device_len += 1`，所以第一步算整段未缓存的提示，之后每步只算 1 个 token；最后采样出的 token 不再进模型，结束时 `cached_len` 比 `device_len` 少 1。命中前缀缓存时至少留一个提示 token 重算，因为下一个 token 要从最后一个位置的 logits 采样。一批请求把各自 `[cached_len, device_len)` 那段首尾相接成一维的 `input_ids`，`positions` 每段是 `arange(cached_len, device_len)`，没有 padding。模型的 `forward()` 不带参数，批次挂在进程级的 `Context` 上，只有注意力这类需要它的层去取；`forward_batch` 只在 `with` 块内有效、拒绝嵌套、异常时也清空，把全局状态的风险关在一个很小的范围里。CPU 上的 token 只在拷回之后追加，允许落后于设备，这正是重叠调度能让 CPU 和 GPU 同时干活的前提。

# %% [markdown]
# ## 练习
#
# 1. **分块 prefill 的记账**（第 10 章）。一个 10 个 token 的提示，没有命中缓存，每步最多只许算 4 个 token。不改 `Req` 的任何代码，怎样用三个 `Req` 对象表示“分三块算完这段提示”？写出每块的 `input_ids` 长度、`cached_len`、`device_len`。前两块算完后，能不能像普通请求一样采样、`append_host`？
# 2. **重叠调度下的时间线**（第 11 章）。重叠调度的一轮是：先发射第 k+1 步的前向（之后立即对批里每个请求 `complete_one()`），再处理第 k 步拷回来的 token（`append_host`、判断是否遇到 EOS）。一个请求在第 k 步采样出了 EOS。列出接下来每一刻的 `device_len` 和 `len(input_ids)`，说明 `len(input_ids)` 最多落后几个；再说说这个请求会多算几步、多算的那步结果该怎么处理。
# 3. **`is_greedy` 与采样器**。假设第 6 章的采样器对 `is_greedy` 的请求直接 argmax，其余请求依次做 `logits / temperature`、top-k 截断、top-p 截断、softmax、`multinomial`。(a) 如果 `SamplingParams` 不做校验，`temperature=-1`、`top_p=0` 分别会出什么事？(b) 上游的 `is_greedy` 多要求 `top_p == 1`，在这个采样器下 `temperature=0, top_p=0.9` 的请求会走哪条分支、结果是什么？
#
# ??? success "参考答案"
#
#     1. 一块就是一个 `input_ids` 被截短了的 `Req`：第一块 `input_ids = prompt[:4]`、`cached_len = 0`（`device_len = 4`）；第二块 `input_ids = prompt[:8]`、`cached_len = 4`（`device_len = 8`）；第三块 `input_ids = prompt`、`cached_len = 8`（`device_len = 10`）。每块算的位置都是 `arange(cached_len, device_len)`，公式一点没变。前两块最后一个位置的 logits 预测的是提示里的下一个 token——它本来就知道，采样出来的东西没用；所以前两块不采样、不 `append_host`，也不能进 decode。上游用一个 `Req` 的子类 `ChunkedReq` 表达这一点：它的 `can_decode` 恒为假，`append_host` 直接报错。只有最后一块算完，才像普通 prefill 一样采样出第一个新 token。
#     2. 设第 k 步开始前 `device_len = L`、`len(input_ids) = L`（此前都已拷回）。发射第 k 步后 `complete_one()`：`device_len = L+1`，`len = L`。下一轮先发射第 k+1 步：`device_len = L+2`，`len = L`——此刻落后 2 个，这是最多的时候；接着处理第 k 步的结果：`append_host(EOS)`，`len = L+1`，发现是 EOS，请求结束。所以 `len(input_ids)` 最多落后 2 个（处理完一轮结果后落后 1 个）。第 k+1 步是在 EOS 之后多算的一步，EOS 的发现晚了一轮，这是重叠调度的代价。它的结果没有意义：不能当作新输出回给用户，更不能再释放一次这个请求的资源（上游在 `Scheduler._process_last_data` 里记下上一轮结束的请求集合，据此跳过第二次释放——集合里放 `Req`，正需要请求按身份哈希）。
#     3. (a) `temperature=-1`：logits 取反，模型最不想说的 token 变成最可能的，输出是看似通顺的胡话，而且不会报任何错；`top_p=0`：截断后一个 token 都不剩，全部是 `-inf`，softmax 得到全 `nan`，`multinomial` 报错或采出垃圾。(b) 按上游的条件 `is_greedy` 为假，请求走采样分支，在这个采样器里第一步就是 `logits / 0`，得到 `inf` 和 `nan`。上游的采样器为此在 `Sampler.prepare` 里把温度夹到不小于 `1e-6`，用一个极低的温度去近似贪心；我们的条件把这种请求直接送去 argmax，结果与贪心一致，更便宜，也不依赖一个魔数。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 3    # 把第 3 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 3     # 判题
# python practice/judge.py hint 3     # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - 一个请求 = 一行 token + `cached_len`、`device_len`、`max_device_len`：三段左闭右开区间分别是“已在 KV 池”“这一步要算”“还能生成”；`extend_len`、`remain_len` 是现算的差。
# - `complete_one()` 让 prefill 和 decode 共用一套公式；最后采样的 token 不进模型，结束时 `cached_len = device_len - 1`；`cached_len < len(input_ids)` 保证每步都有 logits 可采样。
# - `append_host` 允许 CPU 落后于设备、不许超前——重叠调度的前提；请求按身份哈希，才能放进调度器的集合。
# - `Batch` 把各请求这一步的 token 首尾相接，`positions` 每段是 `arange(cached_len, device_len)`；后填的字段用 `SetLater` 写明由谁来填。
# - `Context` 让不带参数的 `model.forward()` 在层里拿到当前批次：只在 `with` 内有效、拒绝嵌套、异常也清空。
# - `SamplingParams` 和 `ENV` 都在入口处把坏值变成清楚的报错；`div_even(..., allow_replicate=True)` 为第 16 章的 KV 头复制铺好了路。
