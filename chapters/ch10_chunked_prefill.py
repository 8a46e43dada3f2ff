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
# # 第 10 章 分块 prefill
#
# 到上一章为止，一个请求的提示在一步里整段算完：提示越长，这一步的注意力越大，正在 decode 的请求也越久拿不到下一个 token。[分块 prefill](../glossary.md#chunked-prefill) 给每一步定一个 [token 预算](../glossary.md#token-budget)（`max_extend_tokens`）：预算不够的提示只算一块，没算完的请求下一步回到队首接着算。本章写 [ChunkedReq](../glossary.md#chunked-req) 和带预算的 `PrefillAdder`，量出块大小对内存峰值的影响，再量一个常被说错的地方：按上游的调度，分块并不让 decode 少等。块大小取 1、7、64，贪心输出都与 Hugging Face 逐 token 一致。

# %% tags=["remove-cell"]
from minibook.page import *
setup(10)

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 一段提示的第 `[s, e)` 块，注意力有多少个 query、多少个 key？掩码能不能用 `is_causal=True`？
# 2. 为什么一批里最多只有最后一个请求被切开？
# 3. 只算了一块的请求，这一步采样出的 token 怎么处理？
# 4. 上游的调度是 prefill 优先、被切开的请求留在队首。一段长提示切成 8 块时，正在 decode 的请求要等几块？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. `e - s` 个 query，`e` 个 key：前面各块已经在 KV 池里，加上这一块自己。query 比 key 少，`is_causal=True` 的左上对齐是错的，要第 5 章的右下对齐掩码。
#     2. 预算从队首往后扣；收到预算不够的请求时只收它的一块，预算正好用完，这一步就结束了。
#     3. 丢掉：它的最后一个位置不是提示的结尾。不追加、不回报、不进 decode，也不写进 token 池——那一格是下一块的提示。
#     4. 8 块全部算完才轮到 decode：每一步都有 prefill 可做（被切开的请求一直在队首），而 prefill 优先。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章不新建 `minisgl/` 下的文件，只改调度器：`prefill.py`（`ChunkedReq`、按预算切块的 `PrefillAdder`），`utils.py`（`PendingReq.chunked_req`），`scheduler.py`（丢掉块的 token、取消算到一半的请求、可选的调度顺序），`config.py`（开关 `decode_between_chunks`）。`examples/ch10_experiments.py` 是本章的两个实验。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch10_chunked_prefill.py`：一段 53 个 token 的提示和三个短提示，块大小取 1、7、64（tiny Qwen3 再加 16），在 SmolLM2 和 tiny Qwen3 上逐 token 对照 HF；打印块大小 16 时每一步 prefill 算了谁的哪一段；最后比较两种调度顺序下每一步是 prefill 还是 decode。`python tools/steps.py check 10` 会搭出本章的树、跑这个 main 和测试；只想跑 main：
#
# ```bash
# python tools/steps.py run 10 -- python examples/ch10_chunked_prefill.py
# ```
#
# ![上半：等待队列 A（20 个 token）、B（3 个）、C（6 个），每步预算 8 个 token：第 1、2 步各算 A 的一块，A 留在队首；第 3 步 A 算完、B 整段、C 只算 1 个 token；第 4 步 C 算完。下半：长提示切成 3 块时，prefill 优先的调度让 decode 等完全部 3 块；两块之间插一步 decode 时每次最多等 1 块，代价是长提示的首 token 晚 2 步](../assets/ch10_chunked_prefill.svg)

# %% [markdown]
# ## 先量：一步算完一段长提示，分数矩阵随长度平方涨
#
# 一段 `n` 个 token 的提示一步 prefill，注意力要为每个头算一个 `[n, n]` 的分数矩阵。tiny Qwen3 有 16 个 q 头，`n = 2048` 时这个矩阵是 16 × 2048 × 2048 × 4 字节 = 256 MiB。量内存用 `torch.profiler` 的 `profile_memory`：它记下 torch 在 CPU 上每一次分配和释放，按时间累加，最大值就是这段时间里比开始时多出的峰值。

# %% tags=["remove-input"]
listing("examples/ch10_experiments.py", "peak_memory")

# %% [markdown]
# ??? note "深入：为什么不看进程的 RSS"
#
#     RSS 是操作系统眼里这个进程占的物理内存。glibc 把释放掉的小块留在自己手里复用，大块直接还给系统，RSS 因此既不随每次释放下降，也不只反映 torch 的张量；`ru_maxrss` 是整个进程生命期的最大值，只涨不跌，要每量一次开一个新进程。profiler 记的是 torch 分配器自己的每一笔账，包括算子内部的临时张量，同一个进程里量多少次都行。
#
# 一段提示整段 prefill（预算大于提示），`n` 取 512、1024、2048。SDPA 有几种实现，`torch.nn.attention.sdpa_kernel` 可以指定用哪一种：`MATH` 是教科书写法（先算完整的分数矩阵，再 softmax，再乘 V），另一列是 SDPA 在这台机器上自己选的实现：

# %% tags=["milestone"]
# NBVAL_IGNORE_OUTPUT
import sys

from torch.nn.attention import SDPBackend

sys.path.insert(0, "examples")  # 本章的实验和 main 里的小工具
from ch10_experiments import decode_stall, inter_token_gaps, prefill_peak
from minibook.models import tiny_qwen3

MiB = 2**20
path = tiny_qwen3()
whole = {}  # n → (SDPA 自选的峰值, MATH 的峰值)，单位字节
print(f"{'n':>6}{'分数矩阵（16 头）':>16}{'MATH 峰值':>12}{'SDPA 自选':>12}")
for n in (512, 1024, 2048):
    whole[n] = (prefill_peak(path, n, n), prefill_peak(path, n, n, SDPBackend.MATH))
    print(f"{n:>6}{16 * n * n * 4 / MiB:>14.0f} MiB{whole[n][1] / MiB:>9.0f} MiB{whole[n][0] / MiB:>9.0f} MiB")
assert all(whole[n][1] > 16 * n * n * 4 for n in whole)  # MATH：整个分数矩阵确实在内存里
assert whole[2048][1] > 8 * whole[512][1]  # 长度 ×4，峰值远不止 ×4

# %% [markdown]
# （内存数字随 torch 版本和线程数略有不同。）MATH 一列每次长度翻倍，峰值约翻 4 倍：分数矩阵和 softmax 的结果各一份 `[16, n, n]`。SDPA 自选的那一列小得多：在这台机器的 torch 上它选的是分块计算的 flash 内核，每次只算一小块分数，不物化整个矩阵。它仍然随 `n` 超线性地涨，因为掩码 `[n, n]` 要先转成浮点（不分头，只有一份），MLP 的中间结果也随 `n` 涨。所以“SDPA 物化 [query × key] 的分数矩阵”只对 MATH 这类实现成立；这一点要量，不要背。
#
# ??? note "深入：怎么知道 SDPA 选了哪个内核"
#
#     用 profiler 看算子名（`examples/ch10_experiments.py` 的 `sdpa_ops`，输出在下一格）：带布尔掩码调用 `F.scaled_dot_product_attention`，再包在 `sdpa_kernel([SDPBackend.MATH])` 里调用一次，两次记到的注意力算子不同。GPU 上同样有 flash、memory-efficient、math 几种，选哪个取决于 dtype、掩码和硬件。分块 prefill 对两种实现都有用：MATH 的分数矩阵从 `[n, n]` 变成 `[chunk, e]`，flash 的掩码和 MLP 中间结果从 `n` 行变成 `chunk` 行。

# %%
from ch10_experiments import sdpa_ops

print("SDPA 自选：", sdpa_ops())
print("MATH：    ", sdpa_ops(SDPBackend.MATH))
assert "aten::_scaled_dot_product_attention_math" in sdpa_ops(SDPBackend.MATH)

# %% [markdown]
# ## ChunkedReq：提示只算了一块的请求
#
# 一块算完，请求的最后一个位置不是提示的结尾，那里的 logits 不给出输出 token。`ChunkedReq` 就是这样一个请求：

# %% tags=["remove-input"]
listing("minisgl/scheduler/prefill.py", "ChunkedReq")

# %% [markdown]
# `can_decode` 为假，`DecodeManager.filter_reqs` 就不会收它；`append_host` 直接报错，谁要给它追加 token 就是调度器错了。Engine 照常为它采样一个 token（它不知道这是一块），调度器丢掉这个结果。
#
# ## PrefillAdder：预算从队首往后扣，不够就切
#
# 第 7 章的 `PrefillAdder` 收下第一个请求时不看预算；这一章改成：预算还有剩就收，收不下整段就只收一块。

# %% tags=["remove-input"]
listing("minisgl/scheduler/prefill.py", "PrefillAdder.try_add_one")

# %% [markdown]
# 接着算的请求不再检查：行、缓存句柄的锁和最坏情况的页，都在它第一次被接纳时拿到了，这里只把还没用的那部分记进这一批的账。新请求由 `_admit` 照第 8 章的规矩接纳（匹配前缀、锁住、预留最坏情况、占一行），再把整段提示一次写进 [token 池](../glossary.md#token-pool)；块从命中的前缀之后开始切。队列怎么变：

# %% tags=["remove-input"]
listing("minisgl/scheduler/prefill.py", "PrefillManager.schedule_next_batch")

# %% [markdown]
# 预算在被切开的那个请求上用完，所以它一定是这一批的最后一个；它的 `PendingReq` 不出队，带着 `chunked_req` 留在队首。用图里的队列（A 有 20 个 token、B 有 3 个、C 有 6 个，预算 8）跑一遍，记下每一步 prefill 算了什么：

# %%
import torch
from ch10_chunked_prefill import TracingLLM, show_prefill_steps
from minisgl.core import SamplingParams

llm = TracingLLM(path, max_running_req=4, page_size=4, num_page_override=64,
                 max_seq_len_override=64, max_extend_tokens=8)
names = {0: "A", 1: "B", 2: "C"}
for uid, n in zip(names, (20, 3, 6)):
    start = 100 * (uid + 1)  # 三段互不相同的提示：不会命中前缀缓存
    llm.add_req(uid, torch.arange(start, start + n, dtype=torch.int32), SamplingParams(max_tokens=2))
first_outputs = []
while llm.prefill_manager.runnable:
    first_outputs.append([names[out.uid] for out in llm.step()])
show_prefill_steps(llm, names)
print("每一步回报了输出 token 的请求：", first_outputs)
llm.shutdown()
assert first_outputs == [[], [], ["A", "B"], ["C"]]

# %% [markdown]
# 和图一致：前两步只有 A 的块，没有任何输出；第 3 步 A 的最后 4 个 token、B 整段、C 的第 1 个 token，A 和 B 各得到第一个输出 token；C 在第 4 步算完。
#
# ## 调度器：块的 token 丢掉，也不写回
#
# 调度器一侧改了三处。收结果时跳过 `ChunkedReq`：

# %% tags=["remove-input"]
listing("minisgl/scheduler/scheduler.py", "Scheduler._process_last_data")

# %% [markdown]
# 第二处在 `_prepare_batch`：新 token 写回 token 池的位置，对 `ChunkedReq` 是 `-1`（最后一列，永远读不到）。写回 `device_len` 看上去无害，那一格却是下一块的第一个提示 token。让错误的版本跑一次：

# %%
from minibook.hf import encode, hf_greedy
from minisgl.llm import LLM


class WritesChunkTokens(LLM):
    """错误的版本：块采样出的 token 也写回 device_len。"""

    def _prepare_batch(self, batch):
        fwd = super()._prepare_batch(batch)
        rows, pos = fwd.write_tuple
        pos = torch.tensor([r.device_len for r in batch.reqs])  # 不管是不是 ChunkedReq
        return fwd._replace(write_tuple=(rows, pos))


prompt = encode(path, "Chunked prefill keeps the unfinished request at the head of the queue.")
reference = hf_greedy(path, prompt, 6)
for cls in (LLM, WritesChunkTokens):
    llm = cls(path, max_running_req=2, page_size=4, num_page_override=32, max_seq_len_override=64,
              max_extend_tokens=5)
    out = llm.generate([prompt], SamplingParams(max_tokens=6, ignore_eos=True))[0]["token_ids"]
    print(f"{cls.__name__:<17} {out}  与 HF 一致：{out == reference}")
    llm.shutdown()
assert out != reference

# %% [markdown]
# 每一块的垃圾 token 覆盖了下一块的第一个提示 token，模型读到的是另一段提示，输出变了，却不报错。第三处是取消：排队中的请求如果已经算了几块，它占着一行和几页，`abort_req` 要把它们还回去（测试 `test_aborting_a_half_prefilled_request_returns_its_row_and_pages`）。
#
# ## 没算完的块不进前缀缓存
#
# 第 8 章起，一个请求 prefill 完，调度器把算好的提示交给[前缀缓存](../glossary.md#prefix-cache)（`cache_req(req, finished=False)`）。`ChunkedReq` 在 `_process_last_data` 里被跳过，也就不交。一段 30 个 token 的提示、预算 8，每一步之后看缓存里存了多少：

# %%
llm = LLM(path, max_running_req=2, page_size=4, num_page_override=32, max_seq_len_override=64,
          max_extend_tokens=8)  # 默认 cache_type="radix"
llm.add_req(0, torch.arange(500, 530, dtype=torch.int32), SamplingParams(max_tokens=2))
cached = []
while llm.prefill_manager.runnable:
    llm.step()
    cached.append(llm.cache_manager.prefix_cache.size_info.total_size)
print("每一步之后前缀缓存里的 token 数：", cached)
llm.shutdown()
assert cached == [0, 0, 0, 28]

# %% [markdown]
# 插进去不会算错，只是没人能用：分块期间它占着队首，后面的请求一个都进不来。最后一块算完，整段提示一起插入（只存整页：30 个 token、每页 4 个，存 28 个）。
#
# ## 块越小，内存峰值越低
#
# 同一段 2048 个 token 的提示，预算取 128、512、2048（最后一个就是不分块）。第 `[s, e)` 块的分数矩阵是 `16 × (e - s) × e`，最后一块的 key 最多：

# %%
# NBVAL_IGNORE_OUTPUT
n = 2048
peaks = {c: (prefill_peak(path, n, c), prefill_peak(path, n, c, SDPBackend.MATH)) for c in (128, 512)}
peaks[n] = whole[n]
plt = pyplot()
chunks = sorted(peaks)
plt.plot(chunks, [peaks[c][1] / MiB for c in chunks], "o-", label="SDPA MATH：物化分数矩阵")
plt.plot(chunks, [peaks[c][0] / MiB for c in chunks], "s-", label="SDPA 自选（flash 内核）")
plt.plot(chunks, [16 * c * n * 4 / MiB for c in chunks], "k--", lw=1, label="最后一块的分数矩阵 16×chunk×2048")
plt.xscale("log", base=2)
plt.xticks(chunks, [str(c) for c in chunks])
plt.xlabel("块大小（max_extend_tokens）")
plt.ylabel("prefill 期间的内存峰值（MiB）")
plt.title("2048 个 token 的提示：块大小与内存峰值（tiny Qwen3）")
plt.legend()
plt.show()
for c in chunks:
    print(f"块大小 {c:>4}：MATH {peaks[c][1] / MiB:6.0f} MiB，SDPA 自选 {peaks[c][0] / MiB:5.0f} MiB")
assert peaks[128][1] < peaks[n][1] / 4 and peaks[128][0] < peaks[n][0]

# %% [markdown]
# MATH 的峰值和最后一块的分数矩阵一起按块大小成比例下降；flash 内核本来就不物化分数矩阵，分块省下的是掩码和 MLP 中间结果，绝对值小得多。块再小，峰值也降不到 0：每一块都要把前面全部 key 从 KV 池里取出来（和 GQA 复制后的 K/V），这部分只随提示总长度涨。
#
# ## 分块不等于不卡：上游的调度下，decode 等完所有块
#
# 常见的说法是“分块 prefill 让长提示不再卡住 decode”。照上游的调度试一试：4 个短请求正在 decode，第 6 步来了一段 1024 个 token 的提示，预算 128（8 块）。记下每个短请求每个 token 到达的时刻，算相邻两个 token 的间隔（[token 间隔](../glossary.md#itl)）；三种设置：不分块、分块（上游的 prefill 优先）、分块并在两块之间插一步 decode（`decode_between_chunks=True`）：

# %%
# NBVAL_IGNORE_OUTPUT
settings = {"不分块": (None, False), "分块 128，prefill 优先（上游）": (128, False),
            "分块 128，两块之间 decode 一步": (128, True)}
stalls = {name: decode_stall(path, 1024, c, between) for name, (c, between) in settings.items()}
fig, axes = plt.subplots(3, 1, sharex=True, sharey=True, figsize=(7.5, 5.6))
for ax, (name, r) in zip(axes, stalls.items()):
    gaps = inter_token_gaps(r["decode_times"][0])
    ax.vlines([t * 1000 for t, _ in gaps], 0, [g * 1000 for _, g in gaps], color="#1d4ed8", lw=2.5)
    ax.axvline(r["ttft"] * 1000, color="#c2410c", ls="--", lw=1.2, label="长提示的首 token")
    ax.set_title(f"{name}：最长间隔 {max(g for _, g in gaps) * 1000:.0f} ms", fontsize=10)
    ax.set_ylabel("token 间隔（ms）")
axes[0].legend(loc="upper right")
axes[-1].set_xlabel("从长提示到达算起的时间（ms）；每条竖线是短请求 0 的一个 token")
fig.tight_layout()
plt.show()
for name, r in stalls.items():
    gaps = [g for times in r["decode_times"] for _, g in inter_token_gaps(times)]
    order = "".join("P" if phase == "prefill" else "D" for phase, *_ in r["steps"])
    waited = sum(1 for phase, _, end, _ in r["steps"] if phase == "decode" and end < r["ttft"])
    print(f"{name}：最长间隔 {max(gaps) * 1000:.0f} ms，长提示的首 token {r['ttft'] * 1000:.0f} ms"
          f"（之前夹着 {waited} 步 decode），前 16 步 {order[:16]}")
    assert waited == (7 if settings[name][1] else 0)  # 只有插 decode 时，长提示要多等 7 步

# %% [markdown]
# （时间随机器而变；图每次执行这一页时重画。）前两种设置的最长间隔都是一整段 prefill 的时间：分块之后 8 块一块接一块地算，中间没有一步 decode，短请求照样等完全部 8 块，等得并不比不分块少。原因在调度顺序：上游每一步先问 `PrefillManager` 有没有活，被切开的请求一直在队首，每一步都有。第三种设置在两块之间插一步 decode，间隔降到一块加一步 decode；代价是长提示的首 token 之前多了 7 步 decode（8 块之间的 7 个空当）。虚线右边那几条也偏高：长提示加入了 decode，它有 1000 多个 key，而第 5 章的 decode 路径把整批的 key 补齐到最长的那个请求；它只生成 4 个 token，离开后间隔回到原来的水平。下面的检查不依赖计时，只看步骤的顺序：

# %%
def stall_structure(r):
    """长提示到达后，第一个 decode 之前连着几步 prefill；以及最长的 token 间隔里有几步 prefill。"""
    order = [phase for phase, *_ in r["steps"]]
    leading = len(order) - len("".join("P" if p == "prefill" else "D" for p in order).lstrip("P"))
    return leading, max(sum(1 for phase, _, end, _ in r["steps"] if a < end <= b and phase == "prefill")
                        for times in r["decode_times"] for a, b in zip(times, times[1:]))


for name, r in stalls.items():
    leading, worst = stall_structure(r)
    print(f"{name}：开头连续 {leading} 步 prefill，两个 decode token 之间最多夹着 {worst} 步 prefill")
assert stall_structure(stalls["分块 128，prefill 优先（上游）"]) == (8, 8)
assert stall_structure(stalls["分块 128，两块之间 decode 一步"]) == (1, 1)

# %% [markdown]
# 调度顺序是 `Scheduler._schedule_next_batch` 里的几行：

# %% tags=["remove-input"]
listing("minisgl/scheduler/scheduler.py", "Scheduler._schedule_next_batch")

# %% [markdown]
# 引擎里这个开关默认关着，和上游一样；第 15 章的服务器默认打开它（长提示 prefill 时，在跑的流不能停）。打开它是拿长提示的首 token 时间（[TTFT](../glossary.md#ttft)）换在跑请求的 token 间隔：块越多，长提示多等的 decode 步越多（这台机器上一步 decode 只有十几毫秒（图里那些短竖线），和计时的抖动差不多大，所以上面的 TTFT 不一定每次都看得出差别；多出来的步数是确定的）。
#
# ??? note "深入：SGLang 的做法——把 decode 和块放进同一批"
#
#     交替执行仍然让每一步只服务一种请求。完整的 SGLang 可以把一块 prefill 和所有在跑请求的 decode 放进同一次前向（mixed chunked prefill）：decode 的几个 token 搭这一块的便车，矩阵乘的权重只读一遍。这需要一个批里既有多 query 的请求、又有单 query 的请求，我们的 SDPA 后端按批的类型选路径（prefill 逐个请求、decode 整批补齐），要支持它得按请求分派。上游 mini-sglang 没有这个功能，本书也不做。

# %% [markdown]
# ## 运行
#
# 本章的 main，先看源码，再看它在本章的树里真实跑出来的输出：

# %% tags=["remove-input"]
listing("examples/ch10_chunked_prefill.py")

# %%
run("python examples/ch10_chunked_prefill.py")

# %% [markdown]
# 值得注意的地方：
#
# - 两个模型、每个块大小，4 个请求都“与 HF 一致：True”。块大小 1 时 prefill 要 70 步（4 个提示共 70 个 token，每步 1 个），结果照样相同。
# - 块大小 16 的 5 步 prefill：前 3 步只有请求 0 的一块；第 4 步请求 0 的最后 5 个 token、请求 1 整段、请求 2 的一块；第 5 步只剩 6 个 token，预算没用完。
# - 最后两行：第 1 步是三个短请求的 prefill，第 2 步 decode，然后 53 个 token 的长提示到达（预算 20，切成 3 块）。上游的顺序是 `PDPPPD…`，3 块连着算；打开开关后是 `PDPDPDPD…`，每两块之间一步 decode。

# %% [markdown]
# ## 与上游的差异
#
# 名字和接口沿用上游（`ChunkedReq`、`PendingReq.chunked_req`、`PrefillAdder`、`cache_req` 跳过分块请求），差别有三处：
#
# - 我们在第一次接纳时把整段提示写进 token 池，上游每块只写自己那一段，因为写一次更简单；两边都把块的 token 写回 `-1`，提示不会被覆盖。`python/minisgl/scheduler/prefill.py` · `PrefillAdder._add_one_req`
# - 我们接着算一块时按页把剩下的最坏情况记进账，上游按 token 数（`remain_len + output_len`）记，因为第 8 章起我们的预留都以页为单位。`python/minisgl/scheduler/prefill.py` · `PrefillAdder._add_one_req`
# - 我们有 `decode_between_chunks` 开关，上游只有 prefill 优先一种顺序（代码里留着支持别的策略的 TODO），因为本章要量出两种顺序的差别。`python/minisgl/scheduler/scheduler.py` · `Scheduler._schedule_next_batch`
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 没算完的请求：`python/minisgl/scheduler/prefill.py` · `ChunkedReq`（第 23～29 行）
# - 按剩下的预算切一块：`python/minisgl/scheduler/prefill.py` · `PrefillAdder._add_one_req`（第 65～90 行）
# - 接着算上一块，不再分配行：`python/minisgl/scheduler/prefill.py` · `PrefillAdder.try_add_one`（第 92～113 行）
# - 切开的请求记在排队的请求上、回到队首：`python/minisgl/scheduler/utils.py` · `PendingReq`（第 14～27 行）、`python/minisgl/scheduler/prefill.py` · `PrefillManager.schedule_next_batch`（第 126～151 行）
# - 块不回报、不进前缀缓存：`python/minisgl/scheduler/scheduler.py` · `Scheduler._process_last_data`（第 138～167 行）
# - prefill 优先：`python/minisgl/scheduler/scheduler.py` · `Scheduler._schedule_next_batch`（第 219～225 行）
# - 取消算到一半的请求：`python/minisgl/scheduler/prefill.py` · `PrefillManager.abort_req`（第 153～158 行）

# %% [markdown]
# ## 测试
#
# 本章的测试在 `tests/test_ch10_chunked_prefill.py`。块大小 1、7、64，两种调度顺序，贪心输出都与 HF 逐 token 一致；切块的计划和另一种想法算出的计划（把所有提示首尾相接，每 `max_extend_tokens` 个切一刀）逐步相同：

# %% tags=["remove-input"]
listing("tests/test_ch10_chunked_prefill.py", "test_only_the_last_request_is_chunked_and_it_comes_back_first")

# %% [markdown]
# 其余测试覆盖：命中前缀缓存之后从命中处接着切，输出仍与 HF 一致；`ChunkedReq` 不回报、不进 decode、不能追加 token，token 池里的提示不被覆盖；没算完的块不进前缀缓存；取消算到一半的请求还回行和页；打开开关后两块之间恰好一步 decode；MATH 实现下块越小峰值越低。在本章的树里跑其中几个（全部测试由 `steps.py check 10` 跑）：

# %%
run("python -m pytest -q --color=no tests/test_ch10_chunked_prefill.py -k 'last_request or never_sampled or aborting'")

# %% [markdown]
# ## 怎么讲清楚
#
# 分块 prefill 给每一步定一个 token 预算。调度器从队首收请求，预算不够整段就只收一块，这个请求变成 ChunkedReq：这一步不采样、不回报、不进 decode，下一步回到队首接着算，所以一批里只有最后一个请求可能被切开。它的好处是一步的工作量有上限：教科书式的注意力，分数矩阵从 n×n 降到块大小×n，2048 个 token 的提示在 tiny Qwen3 上峰值从六百多 MiB 降到几十 MiB。但它本身不让 decode 少等：上游是 prefill 优先，块接着块算完才轮到 decode；要在两块之间插 decode，得改调度顺序，代价是长提示的首 token 变晚。

# %% [markdown]
# ## 练习
#
# 1. **块大小取多少**。块越小，峰值越低、插 decode 的机会越多；块太小有什么代价？用本章的 `decode_stall` 怎样量出来？
# 2. **预算算不算 decode**。打开 `decode_between_chunks` 后，一步 prefill 和一步 decode 交替。如果想让每一步的总 token 数都不超过预算，一块该取多大？
# 3. **挑战：混合批**。设计让一块 prefill 和在跑请求的 decode 进同一次前向：`PrefillAdder` 和 SDPA 后端各要改什么？
#
# ??? success "参考答案"
#
#     1. 每一步都有固定开销（调度、拼批、每层一遍权重读取），块越小步数越多，长提示的首 token 越晚；每块还要重新取出前面全部 key，总的 K/V 读取量随块数增加。用 `decode_stall` 扫几个块大小，看长提示的 TTFT 和最长间隔怎样此消彼长。
#     2. 交替时 prefill 和 decode 不在同一步，每一步各自不超预算即可；如果要求“相邻两步之和”不超预算，块大小就取预算减去在跑的请求数。
#     3. `PrefillAdder` 先把所有在跑请求各算 1 个 token 记进预算，剩下的给块；批里同时有 decode 请求（1 个 query）和一块（多个 query），`Batch.phase` 不再只有两种。SDPA 后端要按请求分派：单 query 的请求整批补齐一次算，多 query 的逐个请求带右下对齐掩码算，最后按原顺序拼回。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 30   # 把第 30 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 30    # 判题
# python practice/judge.py hint 30    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - 每一步最多算 `max_extend_tokens` 个提示 token；预算不够整段的请求只算一块，变成 `ChunkedReq`，带着行和页留在队首，下一步接着算。
# - 一批里只有最后一个请求可能被切开；`ChunkedReq` 采样出的 token 丢掉，不回报、不进 decode、不写回 token 池。
# - 分块让一步的工作量有上限：物化分数矩阵的注意力，峰值随块大小成比例下降；flash 内核本来就不物化它，省得少。
# - 上游的调度是 prefill 优先，长提示的各块一块接一块，decode 等完所有块；`decode_between_chunks=True` 在两块之间插一步 decode，拿长提示的 TTFT 换在跑请求的 token 间隔。
