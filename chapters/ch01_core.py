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
# 第 0 章的最小引擎一次只服务一个提示，一个 `cache.length` 就记得住进度；真正的引擎同时服务许多请求，它们提示长短不一、进度各不相同。本章用四个小对象给它们记账：一个请求用三个整数记下自己走到了哪，一批把这一步要算的 token 首尾相接，前向期间的当前批次挂在进程的上下文上，坏的采样参数在门口就被拦住。它们不碰模型也不碰 GPU，本章的 main 用一个“把 token 加 1”的假模型走完几个请求的一生。运行结果会表明：prefill 和 decode 共用一套公式，进度不同的请求能拼成一批，而每一步的记账在新 token 回到 CPU 之前就已完成。

# %% tags=["remove-cell"]
from minibook.page import *
_ = setup(1)  # 赋值而不显示：返回的树路径随机器而变

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 提示 10 个 token，前 4 个命中了前缀缓存，`output_len = 3`。刚创建时 `cached_len`、`device_len`、`extend_len`、`remain_len` 各是多少？这一步的 positions 是什么？
# 2. 就算整段提示都在前缀缓存里，构造 `Req` 时也要求 `cached_len < len(input_ids)`。为什么？
# 3. `complete_one()` 为什么在发出前向时就调用，而不等新 token 回到 CPU？
# 4. 模型的 `forward()` 不带参数，注意力层怎么拿到这一批的 positions？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 4、10、6、3；positions 是 `[4, 5, …, 9]`，从 `cached_len` 开始，不从 0 开始。
#     2. 下一个 token 来自这一步最后一个位置的 logits；一个 token 都不算就没有 logits 可采样，所以至少留最后一个提示 token 重算。
#     3. 下一步要算哪些位置只取决于长度，不取决于新 token 的值；发出时就记账，调度器就能在第 N 步的 token 拷回之前准备好第 N+1 步。
#     4. 引擎在 `with ctx.forward_batch(batch):` 里调用模型，层用 `get_global_ctx().batch` 读当前批次；块外去读、嵌套进入都会触发断言。

# %% [markdown]
# ## 本章要回顾的文件
#
# 这是 `minisgl` 包的第一章：包的骨架、`core.py`、`env.py` 和 `utils/` 都从这里开始。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch01_core.py`，不加载模型：假模型把每个请求最后一个 token 加 1 当作下一个 token。`python tools/steps.py check 1` 会搭出本章的树，运行这个 main 和本章的测试；只跑 main 用 `python tools/steps.py run 1 -- python examples/ch01_core.py`。它的一步和真实引擎的一步顺序相同：

# %% tags=["remove-input"]
listing("examples/ch01_core.py", "run_one_step")

# %% [markdown]
# 先发出前向并立刻记账（`complete_one`），新 token 拷回 CPU 之后再追加（`append_host`）。本章把这几个名字逐一讲清楚。
#
# ## 一张图：三段长度，和一批怎么拼
#
# ![上半：一个请求在 prefill 和三次 decode 中三段区间的变化；下半：三个请求这一步要算的 token 首尾相接成 Batch 的 input_ids 和 positions](../assets/ch01_req_lifecycle.svg)
#
# 上半张图每一行是一次前向开始时的样子：橙色段是这一步要算的 token，prefill 时是整段提示，之后每次 decode 只有 1 格并右移一格。下半张图是一个 prefill 批：各请求只贡献自己的橙色段，首尾相接成一维的 `input_ids`，`positions` 每段从各自的 `cached_len` 算起。

# %% [markdown]
# ## 一个请求就是三个整数
#
# 调度器眼里的请求（[`Req`](../glossary.md#req)）不是一段文本，而是一行 token id 加上 [`cached_len`](../glossary.md#cached-len)、[`device_len`](../glossary.md#device-len)、`max_device_len`。它们把序列切成三段左闭右开的区间：
#
# | 区间 | 含义 | 长度 |
# | --- | --- | --- |
# | `[0, cached_len)` | K/V 已经写在 [KV 池](../glossary.md#kv-pool)里，这一步只读不算 | `cached_len` |
# | `[cached_len, device_len)` | 这一步要送进模型的 token | `extend_len` |
# | `[device_len, max_device_len)` | 还能生成的名额 | `remain_len` |

# %% tags=["remove-input"]
listing("minisgl/core.py", "Req")

# %% [markdown]
# `device_len` 是设备上已知的 token 数，不是 `len(input_ids)`：新 token 先在设备上采样出来，拷回 CPU 是后来的事。`extend_len`、`remain_len` 每次现算，不存成会过期的数字。`__post_init__` 里的检查是给调用方的：构造参数是用户（或前端）交进来的，错了要用中文说清楚收到了什么。
#
# ## 每一步都要有 logits：cached_len 必须小于提示长度
#
# 下一个 token 来自这一步最后一个位置的 [logits](../glossary.md#logits)。`cached_len` 等于提示长度，就意味着这一步一个 token 都不算，也就没有 logits 可采样；哪怕整段提示都在[前缀缓存](../glossary.md#prefix-cache)里，也要留最后一个 token 重算：

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

assert make_req([1, 2, 3], 2, cached_len=2).extend_len == 1  # 缓存 2 个、算 1 个：可以

# %% [markdown]
# ## 发出即记账：complete_one 不等新 token
#
# 一步前向发出之后，新 token 要等设备算完、再拷回 CPU 才能读到。调度器若想趁这段时间准备下一步，就得先知道下一步算哪些位置。下面两个一模一样的请求，一个在发出时记账，一个等 token 回来再记账；在第 1 步的 token 回来之前各自准备第 2 步：

# %%
def next_positions(r):  # 下一步要算的位置：只看长度，不看 token 的值
    return list(range(r.cached_len, r.device_len))


now, late = make_req([5, 6, 7, 8, 9], 3, cached_len=2), make_req([5, 6, 7, 8, 9], 3, cached_len=2)
print("第 1 步算的位置：", next_positions(now))
now.complete_one()  # 发出第 1 步时就记账；late 还在等 token
print("第 1 步的 token 回到 CPU 之前，准备第 2 步：")
print("  发出即记账：  ", next_positions(now))
print("  等 token 再记账：", next_positions(late), "← 把第 1 步又算了一遍")
assert next_positions(now) == [5] and next_positions(late) == [2, 3, 4]

# %% [markdown]
# 等 token 的那个版本只能干等，否则就把算过的位置再算一遍。所以 `complete_one` 在发出前向时就调用，由 Engine 对整批每个请求各调一次：

# %% tags=["remove-input"]
listing("minisgl/core.py", "Req.complete_one")

# %% [markdown]
# 两行的顺序不能反：先让 `cached_len` 追上 `device_len`（这一步的 token 都会进 KV 池），再给新 token 占一个位置。第一次之后 `extend_len` 恒为 1，[prefill](../glossary.md#prefill) 和 [decode](../glossary.md#decode) 用的是同一个公式。断言守的是调度器的约定：批里的请求都有 token 要算，也还有名额。
#
# ??? note "深入：一段提示分几块算完，Req 和 Engine 都不用改"
#     提示太长时可以分块 prefill：每步只算其中一段，前几块最后一个位置的 logits 预测的是提示里本来就有的 token，不该采样，也不该进 decode。上游用 `Req` 的子类 `ChunkedReq`（`python/minisgl/scheduler/prefill.py`）表示这样的一块：它只覆盖 `can_decode`（恒为假）和 `append_host`（直接报错）。`complete_one` 照常由 Engine 调用，`cached_len` 追上这一块的末尾；多出的那 1 个 `device_len` 随这一块的对象一起丢掉，下一块从 `cached_len` 重新构造。
#
# ## CPU 上的 token 可以落后，不能超前
#
# `append_host` 在新 token 拷回 CPU 之后把它追加到 `input_ids`，只要求追加之前 `len(input_ids) < device_len`。调度器已经发出第 2 步、第 1 步的 token 才回来，落后 2 个是正常的；比 `device_len` 还多则意味着一个设备上没生成过的 token，只能是调用顺序错了：

# %%
req = make_req([1, 2, 3, 4], output_len=5)
req.complete_one()  # 第 1 步已发出
req.complete_one()  # 第 2 步也已发出，第 1 步的 token 还没回来
print(f"len(input_ids)={len(req.input_ids)}，device_len={req.device_len}：落后 2 个，允许")
req.append_host(11)  # 第 1 步的结果到了
req.append_host(torch.tensor(12))  # 第 2 步的结果；单元素张量也收，存成 int32
print(f"len(input_ids)={len(req.input_ids)}，device_len={req.device_len}：追上了")
try:
    req.append_host(13)
    raise AssertionError("应该被拒绝")
except AssertionError as e:
    print("再追加一个 →", e)
assert req.input_ids[-2:].tolist() == [11, 12] and req.input_ids.dtype == torch.int32

# %% [markdown]
# 这是引擎内部的约定，所以用 `assert`，而不是给用户看的中文 `ValueError`。
#
# ??? note "深入：为什么 eq=False、kw_only=True"
#     `dataclass` 默认生成按字段比较的 `__eq__`，并因此把 `__hash__` 设为 `None`，请求就放不进 `set`、当不了 `dict` 的键；调度器恰恰要用集合记住“这一轮结束的请求”。而两个提示和参数都一样的请求，依然是两个用户的两次请求，不能当成一个：所以 `eq=False`，按对象身份比较和哈希。`kw_only=True` 让七个构造参数只能按名字传：`cached_len` 和 `output_len` 都是整数，按位置传反了不会有任何报错。
#
# ??? note "深入：最后一个 token 从没进过模型"
#     请求结束时 `cached_len = device_len - 1`：最后一次采样出的 token 让 `remain_len` 归零，它没有下一步，K/V 永远不会写进 KV 池。把请求的 KV 交还给前缀缓存时，交的就是 `[0, cached_len)` 这一段，不多不少。遇到 [EOS](../glossary.md#eos) 提前结束也不在 `Req` 里判断：`can_decode` 只看长度，EOS 要看采样参数和分词器，由调度器处理输出时决定。
#
# ## 一批：token 首尾相接，位置各算各的
#
# 一批请求的 token 拼成一条一维序列送进模型。最容易写错的是位置：按拼接后的下标算，第二个请求就从 3 开始，命中缓存的第三个请求更是全错：

# %%
from minisgl.core import Batch

reqs = [make_req([11, 12, 13], 4, uid=0), make_req([21, 22], 2, uid=1),
        make_req([41, 42, 43, 44, 45, 46, 47, 48], 3, cached_len=5, uid=2)]
batch = Batch(reqs=reqs, phase="prefill")
batch.padded_reqs = batch.reqs  # 不补齐
batch.input_ids = torch.cat([r.input_ids[r.cached_len:r.device_len] for r in batch.padded_reqs])
wrong = torch.arange(len(batch.input_ids))
batch.positions = torch.cat([torch.arange(r.cached_len, r.device_len) for r in batch.padded_reqs])
print("input_ids：        ", batch.input_ids.tolist())
print("按拼接下标（错）：", wrong.tolist())
print("各算各的（对）：  ", batch.positions.tolist())
assert batch.positions.tolist() == [0, 1, 2, 0, 1, 5, 6, 7]

# %% [markdown]
# 位置告诉 RoPE“这个 token 在它自己的序列里排第几”，跟它在拼接后的数组里排第几无关。[`Batch`](../glossary.md#batch) 创建时只给请求和阶段，其余字段在前向之前才填：

# %% tags=["remove-input"]
listing("minisgl/core.py", "Batch")

# %% [markdown]
# 后填的字段写成 `field(init=False)`：填之前去读，得到的 `AttributeError` 直接点出字段名（main 的第四节打印了一次）。`padded_reqs` 是补上占位请求后的列表，`size` 是真实请求数，采样只看前 `size` 个。
#
# ??? note "深入：要不要一个会说“由谁来填”的描述符"
#     也可以写一个 30 行左右的描述符，让没填的字段报“由调度器在准备批次时填写”。多出的那半句，读者在字段旁的注释里就能看到；`field(init=False)` 的报错已经点出字段名，也和上游一致。为一句话多一个概念，不划算。
#
# ## 当前批次挂在 Context 上，只在 with 块里有
#
# 模型是一棵层的树，几乎所有层只需要上一层的输出张量，只有注意力层还要知道这一批的 positions 和各请求的长度。与其给每层的 `forward` 都加一个用不到的 `batch` 参数，不如让模型的 `forward()` 不带参数，批次挂在进程级的 [`Context`](../glossary.md#context) 上，需要的层自己去取：

# %% tags=["remove-input"]
listing("minisgl/core.py", "Context")

# %%
from minisgl.core import Context, get_global_ctx, set_global_ctx

ctx = Context(page_size=1)
set_global_ctx(ctx)


def attention_layer_positions():  # 模型深处的一层：没有 batch 参数，自己去取
    return get_global_ctx().batch.positions.tolist()


try:
    attention_layer_positions()
except AssertionError as e:
    print("块外：", e)
with ctx.forward_batch(batch):
    print("块内：", attention_layer_positions())
    try:
        with ctx.forward_batch(batch):
            pass
    except AssertionError as e:
        print("嵌套：", e)
    assert ctx.batch is batch  # 被拒绝的内层没有清掉外层
try:
    with ctx.forward_batch(batch):
        raise MemoryError("假装显存不够")
except MemoryError:
    pass
print("出异常之后：", ctx)
assert repr(ctx) == "Context(page_size=1, batch=None)"

# %% [markdown]
# 三条规矩把全局状态关在很小的范围里：批次只在 `with` 块里有；一个进程同一时刻只有一批在前向，嵌套一定是调用写错了；前向中途出异常，`finally` 也会清掉批次。`Context` 上只放前向真正要读的东西：页大小、注意力后端和当前批次。
#
# ??? note "深入：全局上下文为什么允许替换"
#     `set_global_ctx` 由 Engine 创建时调用。上游断言一个进程只登记一次；我们允许新登记的替换旧的、传 `None` 清除，因为本书的 notebook 和测试会在同一个进程里先后创建好几个 Engine，同一时刻仍然只有一个生效。`page_size` 是 `Context` 唯一的构造参数：KV 池按页分配，注意力后端按页组织元数据，它们都从这里读同一个数。
#
# ## 坏参数在门口拦住
#
# 采样的公式是 `softmax(logits / temperature)`，再按 top-k、top-p 截断。照着公式直接算，坏参数不会报错，只会悄悄变成 `nan`：

# %%
logits = torch.tensor([2.0, 1.0, 0.5])
print("temperature = 0 直接除：", torch.softmax(logits / 0.0, dim=-1).tolist())
print("top_p = 0 一个都不留：  ", torch.softmax(torch.full((3,), float("-inf")), dim=-1).tolist())
for bad in (dict(temperature=-0.5), dict(top_p=0.0), dict(top_k=0), dict(max_tokens=True)):
    try:
        SamplingParams(**bad)
        raise AssertionError("应该被拒绝")
    except ValueError as e:
        print(f"SamplingParams(**{bad}) → {e}")

# %% [markdown]
# `nan` 会在调度器的循环里才冒出来，离用户传参的地方隔着好几个进程。所以 [`SamplingParams`](../glossary.md#sampling-params) 构造时就检查，服务层可以把这个 `ValueError` 原样变成一个 400 响应：

# %% tags=["remove-input"]
listing("minisgl/core.py", "SamplingParams")

# %% [markdown]
# `max_tokens=True` 被拒绝，是因为 `bool` 是 `int` 的子类，`True` 会被当成 1 悄悄放行。`temperature = 0` 本身合法，表示[贪心](../glossary.md#greedy)：采样器先看 `is_greedy`，是贪心就取 argmax，不拿它做除数。小于 1e-5 的温度也按贪心（和 vLLM 一样）：除以 1e-40 会让 logits 溢出成 inf，再变成 NaN，抽到的就不是 argmax 了。
#
# ??? note "深入：is_greedy 为什么不看 top_p"
#     top-p 截断总会保留概率最大的那个 token。温度为 0 时分布退化成 argmax，截断与否都一样；top-k 为 1 时只剩第一名，再加 top-p 也一样。结果与每步取 argmax 完全相同，就该走更快、也确定的 argmax 分支。
#
# ## env 与 utils：只放前六章用得上的
#
# `env.py` 里目前只有一个设置：日志级别 `MINISGL_LOG_LEVEL`。它每次读都现读 `os.environ`，写错就报错：

# %%
import os
from minisgl.env import ENV, EnvError

saved = os.environ.get("MINISGL_LOG_LEVEL")
try:
    os.environ["MINISGL_LOG_LEVEL"] = "warning"
    print("设成 warning：", ENV.LOG_LEVEL)  # 不用重新导入，马上读到新值
    os.environ["MINISGL_LOG_LEVEL"] = "loud"
    try:
        ENV.LOG_LEVEL
        raise AssertionError("应该报错")
    except EnvError as e:
        print("设成 loud：", e)
finally:
    os.environ.pop("MINISGL_LOG_LEVEL", None)
    if saved is not None:
        os.environ["MINISGL_LOG_LEVEL"] = saved
assert ENV.LOG_LEVEL == (saved or "INFO").upper()

# %% [markdown]
# 写错的开关若悄悄退回默认值，你会以为设置生效了，却查不出为什么没变化。后面的章节需要新的开关时，在 `Env` 里各加一行。`utils/` 里是几个有名字的小工具：`div_even`（整除，分不匀就报错）、`div_ceil`、`align_ceil`（按页取整）、`is_cuda`、`device_of`、`torch_dtype`、`to_device`（把 CPU 上的数交给设备：CUDA 上先放进[锁页内存](../glossary.md#pinned-memory)再 `non_blocking` 拷贝，CPU 不必等它拷完；CPU 上就是普通的张量），带 rank 前缀的日志，以及注册表 `Registry`（名字 → 实现，名字写错时报一条中文错误并列出可选的名字；模型架构、注意力后端、前缀缓存都用它登记）；它们在第 2 到第 9 章陆续用到。
#
# ??? note "深入：div_even 与 KV 头的复制"
#     张量并行要把 query 头、MLP 中间维、词表平均分给每个 rank，分不匀就该在建模型时报错。`allow_replicate=True` 是专给 KV 头留的口子：GQA 模型的 KV 头常常比 rank 还少，这时每个 rank 放 1 个 KV 头，每个头复制到 `b // a` 个 rank 上。以 Qwen3-0.6B 为例（16 个 query 头、8 个 KV 头）：TP=2 每个 rank 8 个 query 头、4 个 KV 头；TP=16 每个 rank 1 个 query 头、1 个 KV 头，每个 KV 头复制 2 份；TP=3 时 `div_even(16, 3)` 直接报错。query 头不能复制，复制了就是两个 rank 算同一份输出。

# %% [markdown]
# ## 运行
#
# 把本章的 main 跑一遍（输出是在本章的树里真实跑出来的）：

# %%
run("python examples/ch01_core.py")

# %% [markdown]
# 值得注意的地方：
#
# - **第二节**：“这一步算的位置”一列，prefill 是 `[0, 1, 2]`，之后每步只有一个位置；`remain_len` 从 4 减到 0，恰好 4 个新 token。最后一行 `cached_len = 6`、`device_len = 7`，差的那一个就是从没进过模型的 17。
# - **第三节**：请求 2 命中了 5 个 token 的缓存，它的 positions 是 `5, 6, 7`；decode 第 1 步三个请求的位置是 `[3, 2, 8]`，各是自己的 `device_len - 1`。请求 1 在第 1 步之后就结束，批次一步比一步小。
# - **第四节**：未填的 `batch.positions` 报的是字段名；嵌套被拒绝之后外层还在，异常之后 `batch=None`。
# - **第五节**：`temperature=0.7, top_k=1` 也是贪心；`MINISGL_LOG_LEVEL=loud` 的报错给出了变量名、收到的值、合法的写法和默认值。

# %% [markdown]
# ## 与上游的差异
#
# - 我们在 `SamplingParams` 和 `Req` 构造时抛中文 `ValueError`，[上游](../glossary.md#upstream)不校验采样参数（`core.py` · `SamplingParams`，坏温度由 `engine/sample.py` · `Sampler.prepare` 夹到 `1e-6`），因为坏参数到了采样器里只会变成 `nan` 或被悄悄改写。
# - 我们的 `is_greedy` 不看 `top_p`，上游还要求 `top_p == 1`（`core.py` · `SamplingParams.is_greedy`），因为 top-p 截断总保留第一名，结果与 argmax 相同。
# - 我们允许 `set_global_ctx` 替换和清除，上游断言只登记一次（`core.py` · `set_global_ctx`），因为本书在一个进程里先后创建多个 Engine。
# - 我们的 `ENV` 每次现读、写错就抛 `EnvError`，上游在导入时读一次、解析失败悄悄用默认值（`env.py` · `EnvClassSingleton`），因为看似生效的错开关最难查。
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 采样参数：`python/minisgl/core.py` · `SamplingParams`（第 15～25 行）
# - 请求、它的三段长度和发出即记账：`python/minisgl/core.py` · `Req`（第 28～68 行）
# - 一批请求：`python/minisgl/core.py` · `Batch`（第 71～97 行）
# - 全局上下文：`python/minisgl/core.py` · `Context`（第 100～122 行）、`python/minisgl/core.py` · `set_global_ctx`（第 128～131 行）、`python/minisgl/core.py` · `get_global_ctx`（第 134～136 行）
# - 发出即记账的两头，前向之后就 `complete_one()`，拷回之后才 `append_host`：`python/minisgl/engine/engine.py` · `Engine.forward_batch`（第 191～206 行）、`python/minisgl/scheduler/scheduler.py` · `Scheduler._process_last_data`（第 138～167 行）
# - 环境变量：`python/minisgl/env.py` · `EnvClassSingleton`（第 58～84 行）
# - 整数工具：`python/minisgl/utils/misc.py` · `div_even`（第 20～26 行）、`python/minisgl/utils/misc.py` · `div_ceil`（第 29～31 行）

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch01_core.py`，不需要模型，几秒跑完。这一个把“发出即记账”写成了断言：两步都已发出、token 一个都没回来时，长度已经前进了两步，下一步的位置已经确定。

# %% tags=["remove-input"]
listing("tests/test_ch01_core.py", "test_complete_one_books_the_step_before_the_token_reaches_cpu")

# %% [markdown]
# 另一个在 20 组随机的提示长度、缓存命中长度、输出长度上走完请求的一生，每一步核对三段区间；其余覆盖每一种坏参数、`Context` 的三条规矩、环境变量和整数工具。在本章的树里跑全部：

# %%
run("python -m pytest -q --color=no tests/test_ch01_core.py")

# %% [markdown]
# ## 怎么讲清楚
#
# 一个请求就是一行 token 加三个整数：`cached_len`、`device_len`、`max_device_len`，把序列切成“已在 KV 池”“这一步要算”“还能生成”三段。prefill 和 decode 共用一个公式：每发出一步，`cached_len` 追上 `device_len`，`device_len` 加 1。记账在发出时就做，不等 token 回到 CPU，调度器才能提前准备下一步。一批请求把各自要算的那段首尾相接，位置各从自己的 `cached_len` 算起。举个数：提示 10 个、命中 4 个，第一步算位置 4 到 9，之后每步 1 个。

# %% [markdown]
# ## 练习
#
# 1. **重叠的时间线**。调度器每一轮先发出第 k+1 步（随即 `complete_one()`），再处理第 k 步拷回的 token（`append_host`，判断 EOS）。某个请求在第 k 步采样出了 EOS：列出接下来每一刻的 `device_len` 和 `len(input_ids)`，`len(input_ids)` 最多落后几个？
# 2. **记账放错地方**。如果把 `complete_one()` 挪到 `append_host()` 之后（等 token 回来再记账），而调度器仍然在第 k 步的 token 回来之前准备第 k+1 步，第 k+1 步会算哪些位置？输出会怎样？
# 3. **挑战：分块的请求**。写一个 `Req` 的子类，表示“提示分块 prefill、这一块不采样”。一个 10 个 token 的提示、每块最多 4 个：每块构造时的 `input_ids` 长度和 `cached_len` 是多少？子类要覆盖哪几个方法，`complete_one` 要不要改？
#
# ??? success "参考答案"
#
#     1. 设发出第 k 步前两者都是 L：发出第 k 步后 `device_len = L+1`；下一轮先发出第 k+1 步，`device_len = L+2`，`len(input_ids)` 仍是 L，此刻落后 2 个，是最多的时候。处理第 k 步的结果后 `len = L+1`，发现 EOS，请求结束；第 k+1 步是多算的一步，它的结果要丢掉，也不能再释放一次这个请求的资源。
#     2. 第 k+1 步准备时长度还没动，它会重算第 k 步的那些位置，把同样的 K/V 再写一遍，并从同一个位置再采样一次。decode 时这意味着每个 token 被生成两次，输出里出现重复，或者调度器只能干等，重叠也就没有了。
#     3. 三块依次用长度 4、8、10 的 `input_ids`，`cached_len` 依次是 0、4、8；前两块用子类，最后一块用普通 `Req`，算完才采样出第一个新 token。子类覆盖 `can_decode`（恒为假，不进 decode）和 `append_host`（直接报错，这一块不采样）。`complete_one` 不用改：它让 `cached_len` 追上这一块的末尾，多出的那 1 个 `device_len` 随对象丢掉，下一块从 `cached_len` 重新构造。
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
# - 一个请求 = 一行 token + `cached_len`、`device_len`、`max_device_len`：三段区间分别是“已在 KV 池”“这一步要算”“还能生成”。
# - `complete_one()` 在发出前向时记账，prefill 和 decode 共用一个公式；`append_host` 让 CPU 上的 token 可以落后、不能超前。
# - `Batch` 把各请求这一步的 token 首尾相接，`positions` 每段从自己的 `cached_len` 算起；后填的字段是 `field(init=False)`。
# - `Context` 让不带参数的 `model.forward()` 在层里拿到当前批次：只在 `with` 内有效、拒绝嵌套、异常也清空。
# - 用户交进来的值（`SamplingParams`、`Req`、环境变量）在入口处给出中文报错，引擎内部的约定用 `assert`。
