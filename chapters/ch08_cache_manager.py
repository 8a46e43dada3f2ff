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
# # 第 8 章 CacheManager
#
# 第 7 章的调度器直接拿着 PageAllocator：一页只属于一个请求，请求结束就还。下一章的[前缀缓存](../glossary.md#prefix-cache)要让几个请求共用同一批页，页不够时还要把缓存的页[逐出](../glossary.md#evict)，于是“谁还指着这一页、什么时候能还”必须有一处统一记账。这一章写这一处：[CacheManager](../glossary.md#cache-manager) 组合分配器和一个可替换的前缀缓存接口，页按持有者计数，接纳按[最坏情况预留](../glossary.md#worst-case-reservation)，调度器空闲时[核对账目](../glossary.md#integrity-check)。main 在一个 16 页的小池子上跑 5 个请求，输出与 Hugging Face 逐 token 一致，账目对得上。

# %% tags=["remove-cell"]
from minibook.page import *
setup(8)

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 一页什么时候回到空闲栈？请求的行和前缀缓存都指着它时呢？
# 2. 接纳一个请求时，为什么要把“在跑的请求将来还要的页”也算进去？
# 3. `match_req` 为什么不拿最后一个提示 token 去匹配？
# 4. 调度器空闲时核对哪几个数？漏还一页会在哪里被发现？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 持有它的最后一方放下时。行和缓存各持有一份，请求结束只放下行的那一份，页留在缓存里。
#     2. 没有抢占：新请求要是吃掉了老请求 decode 要用的页，老请求走到一半就分不到页，只能报错。
#     3. 这一步至少要算一个 token，最后一个位置的 logits 才能采样出下一个 token。
#     4. 空闲页 + 缓存页 = 总页数，没有被锁住的 token，持有份数 = 缓存页数。漏还的一页既不空闲也不在缓存里，第一条等式就对不上。

# %% [markdown]
# ## 本章要回顾的文件
#
# 新建 `scheduler/cache.py`（CacheManager）和 `kvcache/naive_cache.py`（什么都不存的前缀缓存）；`kvcache/base.py` 加上前缀缓存的接口，`kvcache/__init__.py` 加上按名字造缓存的登记表，`kvcache/allocator.py` 加上共享持有；调度器的 `scheduler.py`、`prefill.py` 改为经 CacheManager 分配。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch08_cache_manager.py`：KV 池只有 16 页（每页 4 个 token），5 个请求排队；它一步步跑，记下每一步之后“实际用了几页、预留了几页”（前 3 步和之后每 4 步打印一行），与 HF 的贪心输出逐 token 比较，最后核对账目。`python tools/steps.py check 8` 会搭出本章的树、跑这个 main 和测试；只想跑 main：
#
# ```bash
# python tools/steps.py run 8 -- python examples/ch08_cache_manager.py
# ```
#
# ![一个请求的页怎样经过 CacheManager：接纳时匹配、锁住、预留、行从命中的页开始；每一步 allocate_paged；prefill 之后 cache_req 把新前缀交给缓存，缓存加一份持有；结束时解锁、行放下自己那份；空闲时核对 空闲 + 缓存 = 总数](../assets/ch08_ownership.svg)
#
# ## 一页可以有几个持有者
#
# 第 4 章的分配器已经给每页记了[持有份数](../glossary.md#page-refcount)（引用计数），只是从来没有超过 1。本章给它加两个入口：`hold_pages` 给已经有人持有的页再加一份，`share_prefix` 让一个空行从借来的页开始，对每页加一份并写进页表开头。

# %% tags=["remove-input"]
listing("minisgl/kvcache/allocator.py", "PageAllocator.share_prefix")

# %% [markdown]
# 用 3 页的小池子走一遍：两页先由“缓存”持有，第 1 行借用它们，然后第 1 行结束。

# %%
import sys

import torch

from minisgl.kvcache import PageAllocator

table = torch.full((3, 8), -1, dtype=torch.int32)
alloc = PageAllocator(3, 2, table)
cached = alloc.alloc_pages(2)  # 假装是前缀缓存存下的两页
alloc.share_prefix(1, cached)
print("借用之后：每页持有份数", alloc._refs, "，第 1 行的页表", table[1, :4].tolist())
alloc.free_slots(1, 4)  # 第 1 行结束：只放下它自己那一份
print("第 1 行结束：每页持有份数", alloc._refs, "，空闲页", alloc.num_free_pages)
alloc.free_pages(cached)  # 缓存也放下（逐出）
print("缓存逐出之后：每页持有份数", alloc._refs, "，空闲页", alloc.num_free_pages)
assert alloc.num_free_pages == 3 and alloc.num_holds == 0

# %% [markdown]
# 行结束后两页仍被缓存持有，空闲页还是 1；缓存放下之后它们才回到空闲栈。规则只有一条：谁指着一页，谁就持有它一份，只要还有一行指着它，它就不会被分给别人。
#
# ## 前缀缓存只是一个接口
#
# CacheManager 不关心缓存怎么存，只靠 `kvcache/base.py` 里的约定：键是 token id，值是它们的[槽位](../glossary.md#slot)，都是 CPU 上的 int32，长度以 token 计、只存整页。

# %% tags=["remove-input"]
listing("minisgl/kvcache/base.py", "BasePrefixCache")

# %% [markdown]
# `insert_prefix` 返回的 `cached_len` 是“插入之前就有的长度”：那一段缓存保留自己的槽位，调用者那份不收。`evict` 只交回槽位，不碰持有份数；放下缓存那一份持有，是 CacheManager 去分配器那里做的。本章只有一个实现 `NaivePrefixCache`：永远匹配不到、什么都不存，按名字登记在表里，`create_prefix_cache("naive", page_size)` 造它，第 9 章在同一张表里登记 `"radix"`。
#
# ## 接纳：匹配、锁住、按最坏情况预留
#
# 接纳一个排队的请求时，`PrefillAdder` 先问缓存命中了多少，[锁住](../glossary.md#cache-handle)命中的一段，再数页：

# %% tags=["remove-input"]
listing("minisgl/scheduler/prefill.py", "PrefillAdder.try_add_one")

# %% [markdown]
# 这个请求最坏要的页，是从命中处一直写到 `max_tokens` 为止（最后采样出的 token 不进 KV 池）；加上已经许给别人的页（在跑的请求将来要的、这一批已接纳的），不能超过 `available_size` = 空闲页 + 能逐出的缓存页。先锁再数：锁住的页不再算“能逐出”。
#
# 为什么在跑的请求也要算进去？去掉这一项试试：让 `inflight_pages` 永远返回 0，在 tiny Qwen3 上跑 4 个请求（提示 8 个 token、各生成 24 个），池子 16 页。

# %%
from minibook.models import smollm2, tiny_qwen3
from minisgl.core import SamplingParams
from minisgl.kvcache import OutOfPagesError
from minisgl.llm import LLM

llm = LLM(tiny_qwen3(), max_running_req=4, page_size=4, num_page_override=16,
          max_seq_len_override=64)
llm.decode_manager.inflight_pages = lambda page_size: 0  # 错误的版本：忘了在跑的请求
for uid in range(4):
    llm.add_req(uid, torch.arange(10 + uid, 18 + uid, dtype=torch.int32),
                SamplingParams(max_tokens=24, ignore_eos=True))
steps = 0
try:
    while llm.runnable:
        llm.step()
        steps += 1
except OutOfPagesError as e:
    print(f"第 {steps} 步：在跑 {len(llm.decode_manager.running)} 个请求，OutOfPagesError：{e}")
assert llm.runnable  # 没跑完就停在了半路
llm.shutdown()

# %% [markdown]
# 新请求进来时只看了自己，老请求 decode 到一半就分不到页了。上游和我们都不抢占（把一个请求的页收回、以后重算），于是只能整步报错。预留的代价也看得见：下面 10 个问题用 SmolLM2 的聊天模板提问，`max_tokens = 48`、不忽略 EOS，池子 48 页；每一步之后记下实际用了几页、预留了几页。

# %% tags=["milestone"]
sys.path.insert(0, "examples")
from ch08_cache_manager import pool_trace  # 本章 main 里的逐步记录

questions = ["What is the capital of France?", "Name three primary colors.", "What is 2 + 2?",
             "What is the capital of Japan?", "What color is the sky?",
             "How many legs does a spider have?", "How many days are in a week?",
             "What is the boiling point of water?", "Who wrote Hamlet?", "What is the opposite of hot?"]
chat = LLM(smollm2(), max_running_req=8, page_size=4, num_page_override=48, max_seq_len_override=128)
tok = chat.tokenizer
prompts = [torch.tensor(tok.encode(tok.apply_chat_template(
    [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)), dtype=torch.int32)
    for q in questions]
outputs, trace = pool_trace(chat, prompts, [SamplingParams(max_tokens=48)] * len(prompts))
lens = [len(outputs[uid]) for uid in range(len(prompts))]
early = [n for n in lens if n < 48]
used = sum(t["used"] for t in trace) / len(trace)
reserved = sum(t["reserved"] for t in trace) / len(trace)
idle_share = (reserved - used) / 48
print(f"{len(prompts)} 个请求，提示 {min(map(len, prompts))}–{max(map(len, prompts))} 个 token；"
      f"每个生成的 token 数（含 EOS）：{lens}")
print(f"{len(early)} 个遇到 EOS 提前结束，预留了 48 个输出 token，平均只用了 {sum(early) / len(early):.1f} 个")
print(f"共 {len(trace)} 步，最多同时在跑 {max(t['running'] for t in trace)} 个；"
      f"平均每步实际用 {used:.1f} 页、预留 {reserved:.1f} 页（池子 48 页）")
print(f"预留了、还没用上的页平均占池子的 {idle_share:.0%}")
assert all(t["used"] <= t["reserved"] <= 48 for t in trace)
assert round(idle_share, 2) == 0.25  # 正文引用的数：贪心输出是确定的，变了就要改正文
chat.shutdown()

# %%
plt = pyplot()
fig, ax = plt.subplots()
xs = range(len(trace))
ax.fill_between(xs, [t["reserved"] for t in trace], step="post", alpha=0.25, label="预留的页")
ax.step(xs, [t["used"] for t in trace], where="post", label="实际用的页")
ax.axhline(48, color="gray", linestyle="--", linewidth=1, label="池子 48 页")
ax.set_xlabel("步")
ax.set_ylabel("页数")
ax.set_title("按最坏情况接纳：预留的页与实际用的页")
ax.set_ylim(0, 52)
ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, frameon=False)
fig.tight_layout()
plt.show()

# %% [markdown]
# 浅色的部分是许诺了、还没写的页：它们给在跑的请求兜底，新请求用不上。提前遇到 EOS 的请求预留了 48 个输出 token，只用了十来个；同一时刻最多只有两个请求在跑，平均四分之一的池子是预留了、还没用上的页。这是不抢占换来的：接纳时给足，之后永远不会半路缺页。更激进的接纳（估计输出长度、缺页时抢占）能多放请求进来，代价是重算和更复杂的状态。
#
# ## prefill 之后交给缓存，结束时只放下自己那份
#
# 一个请求的 prefill 算完，它的提示就可以给后来的请求借用；请求结束时再交一次（生成的部分也存进去），然后放下行的持有：

# %% tags=["remove-input"]
listing("minisgl/scheduler/cache.py", "CacheManager.cache_req")

# %% [markdown]
# 插入之后，新存进缓存的那几页 `[already, new)` 由缓存加一份持有；“别的请求在此期间已经存过”的那一段 `[old, already)`，缓存留着别人那份，这一行自己的页既不交出去、也不提前还，直到请求结束和其余的页一起放下。调度器在 `_process_last_data` 里对 prefill 批的请求调用 `cache_req(finished=False)`，结束或取消时经 `_free_req_resources` 调用 `cache_req(finished=True)`。
#
# ??? note "深入：上游在这里提前还了一个还在用的页"
#
#     上游的 `CacheManager.cache_req`（`python/minisgl/scheduler/cache.py`，提交 20fcd7f）对 `[old_handle.cached_len, cached_len)` 这一段调用 `_free`：缓存里已经有同样的前缀，这一行的那几页就还回空闲页。可这一行的页表还指着它们，请求还要接着 decode，注意力每一步都读这几页。什么时候会出现这一段？两个前缀相同的请求在同一个 prefill 批里：谁都没命中（插入发生在 prefill 之后），先插入的那个存下，后插入的那个发现“已经有了”，于是把自己的页还了。下一次分配把这几页交给第三个请求，它写进自己的 K/V，第二个请求读到的前缀就变了，不报错。
#
#     我们的页按持有者计数，这一段既不还、也不交给缓存：页表指着的页，这一行一直持有。测试 `test_duplicate_prefix_in_one_batch_stays_with_its_row_until_it_ends` 用一个测试专用的字典前缀缓存复现这个场景：第三个请求把空闲页全部要走，也拿不到第二个请求还指着的页；把 `cache_req` 改成上游的做法，这个测试和随机负载的测试都会失败。第 9 章有了真正会命中的 radix 树，同一批里的相同前缀会经常出现。

# %% [markdown]
# ## 空闲时核对账目
#
# 请求全部结束时，没有任何一行持有页，于是每一页要么空闲，要么只被缓存持有一份。调度器空闲时调用 `run_when_idle()`，由它核对：

# %% tags=["remove-input"]
listing("minisgl/scheduler/cache.py", "CacheManager.check_integrity")

# %% [markdown]
# 少还一页是最难发现的错误：不报错，池子只是一点点变小，直到某天请求进不来。故意弄坏分配器的 `free_pages`，让它每次还页都漏掉最后一页，跑一个请求：

# %%
leaky = LLM(tiny_qwen3(), max_running_req=2, page_size=2, num_page_override=16,
            max_seq_len_override=32)
free_pages = leaky.page_allocator.free_pages
leaky.page_allocator.free_pages = lambda pages: free_pages(list(pages)[:-1])  # 漏掉一页
try:
    leaky.generate([[1, 2, 3, 4]], SamplingParams(max_tokens=3, ignore_eos=True))
except RuntimeError as e:
    print("RuntimeError：", e)
assert leaky.page_allocator.num_free_pages == 15
leaky.shutdown()

# %% [markdown]
# 最后一个请求结束的那一步，`step()` 发现没有可跑的请求，调用 `run_when_idle()`，错误当场暴露，而不是等到池子用光。上游的核对只有第一条等式，它的 radix 树的 `check_integrity` 是空的（第 9 章补上）。

# %% [markdown]
# ## 运行
#
# 本章的 main 在本章的树里真实跑出来的输出：

# %%
run("python examples/ch08_cache_manager.py")

# %% [markdown]
# 值得注意的地方：
#
# - 第 0 步 prefill 接纳了 3 个请求，用了 6 页，却预留了 15 页：剩下的 2 个请求要等有人结束才进来，8 行页表从来没用满，页才是瓶颈。
# - 每一行都是“已用 ≤ 预留 ≤ 16”，跑完全部请求没有一次缺页。
# - 两个模型、5 个请求都与 HF 一致；结束后空闲 16 页 + 缓存 0 页 = 16 页，核对通过（naive 缓存什么都不存）。
#
# ## 与上游的差异
#
# 名字和接口与[上游](../glossary.md#upstream) mini-sglang 一致（`CacheManager`、`match_req`、`lock` / `unlock`、`allocate_paged`、`cache_req`、`check_integrity`，`BasePrefixCache` 的各个方法），差别有四处：
#
# - 我们的页按持有者计数，重复前缀的页留在行里直到请求结束；上游提前把它们还回空闲页，而行还指着它们，因为它的空闲页是一个没有计数的张量。`python/minisgl/scheduler/cache.py` · `CacheManager.cache_req`
# - 我们的前缀缓存记 CPU 上的槽位，`page_size` 构造时传入；上游的值在 GPU 上，`page_size` 从全局上下文读，因为它的空闲页、页表写入都在 GPU 上做。`python/minisgl/kvcache/__init__.py` · `create_prefix_cache`
# - 我们的 `available_size` 以页计，接纳按页数最坏情况；上游以 token 计，并给每个在跑的请求多留 `page_size - 1` 个 token，因为它的预留按 token 累加。`python/minisgl/scheduler/decode.py` · `DecodeManager.inflight_tokens`
# - 我们空闲时还核对锁和持有份数，出错的报中文和数字；上游只核对“空闲 + 缓存 = 总数”。`python/minisgl/scheduler/cache.py` · `CacheManager.check_integrity`
#
# ## 测试
#
# 本章的测试在 `tests/test_ch08_cache_manager.py`。不加载模型的一组用一个测试专用的字典前缀缓存检查记账：共享的页由两方持有、重复前缀留在行里、页不够时只逐出没锁的页、随机负载下活着的行指着的页从不空闲、三种记账错误各被核对抓住。名字以 `test_llm_` 开头的一组接上调度器，在 SmolLM2 和 tiny Qwen3 上与 HF 对照，检查预留、命中之后只算没命中的部分、漏还一页在空闲时被发现；它们由 `steps.py check 8` 跑。这里只跑前一组：

# %%
run("python -m pytest -q --color=no tests/test_ch08_cache_manager.py -k 'not llm'")

# %% [markdown]
# ## 怎么讲清楚
#
# CacheManager 是调度器一侧唯一管 KV 页的地方，它把分配器和前缀缓存组合起来，靠一条规则记账：谁指着一页，谁就持有它一份。接纳时匹配前缀、先锁后数，按“写到 max_tokens 为止”预留，在跑请求将来要的页也算上，所以从不半路缺页；prefill 之后把新前缀交给缓存，缓存加一份持有，结束时行只放下自己那份；空闲时核对空闲页加缓存页等于总页数。代价是保守：本章的对话负载里，平均四分之一的池子是预留了还没用上的。

# %% [markdown]
# ## 练习
#
# 1. **两个相同的请求**。两个提示完全相同的请求在同一个 prefill 批里，第二个请求在 `cache_req(finished=False)` 时 `old`、`already`、`new` 各是多少（用提示长度表示）？它的页此时有几份持有？
# 2. **先数后锁**。如果 `try_add_one` 先比较 `available_size` 再锁，会在什么情况下接纳一个放不下的请求？
# 3. **挑战：估计输出长度**。设计一种不按 `max_tokens`、而按估计的输出长度接纳的办法，并说明缺页时怎样处理才不会出错。
#
# ??? success "参考答案"
#
#     1. 两个都没命中，`old = 0`；插入的是 prefill 算好的整段提示，第一个已经插入过，所以 `already = new` = 提示长度向下对齐到整页。第二个请求的页只有它的行持有一份：缓存留着第一个请求的页，它的页不交出去。
#     2. 命中的页在锁之前算作“能逐出”，锁住之后就不能逐出了，`available_size` 变小。先数后锁会把这些页算两次：既当成命中不用再分，又当成可以逐出腾地方，命中很长时就会多接纳。
#     3. 例如按历史输出长度的分位数预留，池子不够时选一个在跑的请求抢占：放下它的行（算好的前缀先交给缓存），把它放回队头，以后重新 prefill。要保证被抢占请求的页没有别的行借用，抢占后的记账仍能通过空闲时的核对。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 24   # 把第 24 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 24    # 判题
# python practice/judge.py hint 24    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - CacheManager 组合 PageAllocator 和一个前缀缓存；前缀缓存是一个接口，按名字登记，本章的 naive 实现什么都不存。
# - 页按持有者计数：行和缓存各持有一份，最后一份放下时才回到空闲栈；页表指着的页，行一直持有。
# - 接纳：匹配、锁住、按最坏情况预留（没命中的提示 + max_tokens + 在跑请求将来要的页），不抢占，从不半路缺页；代价是池子有一部分预留了没用上。
# - prefill 之后 `cache_req(finished=False)`，结束时 `cache_req(finished=True)`；调度器空闲时 `check_integrity()`，漏还一页当场报错。
