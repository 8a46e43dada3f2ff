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
# 第 7 章的一页只属于一个请求。有了[前缀缓存](../glossary.md#prefix-cache)，几个请求的开头可以借用同一批页；可同一个 prefill 批里两个提示相同的请求谁都没命中，各算了一份，后算完的那个发现缓存里已经有了——它自己那份页还能不能还？这一章写 [CacheManager](../glossary.md#cache-manager)：组合分配器和一个可替换的前缀缓存，页按持有者计数，谁指着一页，谁就持有它一份。main 把“重复的那份当场还掉”的错误版本和正确版本并排跑：错误版本里第二个请求的输出离开 HF，正确版本三个请求都与 HF 逐 token 一致。

# %% tags=["remove-cell"]
from minibook.page import *
setup(8)

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 两个提示相同的请求在同一个 prefill 批里，第二个算完时缓存里已经有了这段前缀。它自己那几页能当场还掉吗？
# 2. 一页什么时候回到空闲栈？请求的行和前缀缓存都指着它时呢？
# 3. `match_req` 为什么不拿最后一个提示 token 去匹配？
# 4. 调度器空闲时核对哪几个数？第 1 题里的错误它抓得住吗？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 不能。页表这一行还指着它们，注意力每一步都读；还掉后下一个请求分到它们就会写进自己的 K/V。它们随行一直留到请求结束。
#     2. 持有它的最后一方放下时。行和缓存各持有一份，请求结束只放下行的那一份，页留在缓存里。
#     3. 这一步至少要算一个 token：最后一个位置的 logits 才能采样出第一个输出 token，整个提示都在缓存里也一样。
#     4. 空闲页 + 缓存页 = 总页数，没有被锁住的 token，持有份数 = 缓存页数。抓不住：错误版本的账是平的，错的是页表。

# %% [markdown]
# ## 本章要回顾的文件
#
# 新建 `scheduler/cache.py`（CacheManager）和 `kvcache/naive_cache.py`（什么都不存的前缀缓存）；`kvcache/base.py` 加上前缀缓存的接口，`kvcache/__init__.py` 加上按名字造缓存的登记表，`kvcache/allocator.py` 加上共享持有；调度器的 `scheduler.py`、`prefill.py` 改为经 CacheManager 分配。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 重复的那份还掉了，别人就写了进来
#
# SmolLM2，页大小 2。两个相同的提示 A 进了同一个 prefill 批，token 预算正好放下它们，第三个请求 C 下一步才进来。前缀缓存用 main 里的 `PagePrefixCache`（按整页记前缀的字典，第 9 章换成 radix 树）。错误的版本照上游的思路写：第二个 A 算完，缓存里已经有第一个 A 的页，就把自己那份还回空闲栈。

# %% [markdown]
# 错误的版本只差一处：这一行自己重复算出的那几页当场还回空闲栈，页表却还指着它们。

# %% tags=["remove-input"]
listing("examples/ch08_cache_manager.py", "cache_req_freeing_duplicates")

# %% tags=["milestone"]
import sys

sys.path.insert(0, "examples")  # 本章的 main
from ch08_cache_manager import three_requests
from minibook.hf import decode, hf_greedy
from minibook.models import smollm2

path = smollm2()
for wrong in (True, False):
    result = three_requests(path, wrong)
    a2, c = result["pages"]["a2"], result["pages"]["c"]
    out = result["outputs"][1]
    ref = hf_greedy(path, result["prompts"][1], len(out))
    print(f"{'错误' if wrong else '正确'}：第二个 A 的页表指着 {a2}，C 分到 {c}；"
          f"第二个 A 输出 {decode(path, out)!r}，HF {decode(path, ref)!r}")
    assert (out == ref) != wrong and bool(set(a2) & set(c)) == wrong

# %% [markdown]
# 错误的版本里，C 先分到的 3 页正是第二个 A 的页表还指着的 3 页：空闲栈后进先出，刚还的页最先发出去。C 写进自己的 K/V，第二个 A 接下来每一步读到的“前缀”已经是 C 的，输出跟着变了；不报错，空闲时的核对也通过。正确的版本里，这 3 页一直由第二个 A 的行持有，C 拿不到。
#
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch08_cache_manager.py`，上面用的 `three_requests` 和错误的 `cache_req_freeing_duplicates` 都在这个文件里：

# %% tags=["remove-input"]
listing("examples/ch08_cache_manager.py", "main")

# %% [markdown]
# 它把两个版本各跑一遍，打印两行页号、三个请求的输出和与 HF 的比较，最后在空闲时核对账目；输出在后面的“运行”一节。`python tools/steps.py check 8` 会搭出本章的树、跑这个 main 和测试；只想跑 main：
#
# ```bash
# python tools/steps.py run 8 -- python examples/ch08_cache_manager.py
# ```
#
# ![一个请求的页怎样经过 CacheManager：接纳时匹配、锁住、预留、行从命中的页开始；每一步 allocate_paged；prefill 之后 cache_req 把新前缀交给缓存，缓存加一份持有；结束时解锁、行放下自己那份；空闲时核对 空闲 + 缓存 = 总数](../assets/ch08_ownership.svg)
#
# ## 谁指着一页，谁就持有它一份
#
# 第 4 章的分配器已经给每页记了[持有份数](../glossary.md#page-refcount)，只是从来没有超过 1。本章加两个入口：`hold_pages` 给已经有人持有的页再加一份，`share_prefix` 让一个空行从借来的页开始，对每页加一份并写进页表开头。

# %% tags=["remove-input"]
listing("minisgl/kvcache/allocator.py", "PageAllocator.share_prefix")

# %% [markdown]
# 用 3 页的小池子走一遍：两页先由“缓存”持有，第 1 行借用它们，然后第 1 行结束。

# %%
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
# 行结束后两页仍被缓存持有；缓存放下之后它们才回到空闲栈。只要还有一行指着某页，它就不会被分给别人。
#
# ## 前缀缓存只是一个接口
#
# CacheManager 不关心缓存怎么存，只靠 `kvcache/base.py` 里 `BasePrefixCache` 的约定：键是 token id，值是它们的[槽位](../glossary.md#slot)，都是 CPU 上的 int32，长度以 token 计、只存整页。`match_prefix` 找最长的已缓存开头，`lock_handle` 锁住它不被[逐出](../glossary.md#evict)，`insert_prefix` 存进新前缀，`evict` 交回槽位。插入的结果里有一个数决定了开头那个错误：

# %% tags=["remove-input"]
listing("minisgl/kvcache/base.py", "InsertResult")

# %% [markdown]
# 缓存只记槽位，不碰持有份数：存下哪些页、逐出哪些页，由 CacheManager 去分配器那里加上或放下“缓存的那一份”。分配器记页、缓存记槽位，两边之间的换算只有两个函数：页到槽位是第 4 章的 `pages_to_slots`，槽位到页是它的反面，顺带断言这些槽位是一页一页完整排好的：

# %% tags=["remove-input"]
listing("minisgl/kvcache/allocator.py", "slots_to_pages")

# %% [markdown]
# 本章登记了 `NaivePrefixCache`（永远匹配不到），`create_prefix_cache("naive", page_size)` 造它；main 的 `PagePrefixCache` 登记成 `"pages"`，第 9 章登记 `"radix"`。
#
# ## 接纳：最后一个提示 token 不匹配，先锁再数

# %% tags=["remove-input"]
listing("minisgl/scheduler/cache.py", "CacheManager.match_req")

# %% [markdown]
# 最后一个提示 token 不参与匹配：采样第一个输出 token 要它那个位置的 logits，所以它总要在这一步算一遍；整个提示都命中时，这一步也至少算 1 个 token。`PrefillAdder` 接纳时先匹配，[锁住](../glossary.md#cache-handle)命中的一段，再按第 7 章的[最坏情况](../glossary.md#worst-case-reservation)数页：

# %% tags=["remove-input"]
listing("minisgl/scheduler/prefill.py", "PrefillAdder.try_add_one")

# %% [markdown]
# 能拿出的页 `available_size` 现在是空闲页加上缓存里没锁住、能逐出的页。先锁再数：命中的页锁住之后不再算“能逐出”，不会既当成不用再分、又当成能腾出来。
#
# ## prefill 之后交给缓存：锁只加在行指着的页上

# %% tags=["remove-input"]
listing("minisgl/scheduler/cache.py", "CacheManager.cache_req")

# %% [markdown]
# 开头那个场景里，第二个 A 的 `[old, already)` 就是整段提示：它的页不交给缓存，也不还，请求结束时随行放下。请求没结束、又有这一段时，`cache_req` 先不交，连新句柄也不锁——新句柄会锁住缓存的那份，而这一行没指着它。
#
# ??? note "深入：锁住行没指着的页，预留就漏了"
#
#     设第一个 A 只生成 1 个 token，prefill 之后就结束：它的页留在缓存里、没有锁，算在 `available_size` 里。如果第二个 A 这时换上新句柄并锁住，这几页既不能逐出，又不在任何请求的预留里，`available_size` 凭空少了这么多页；之前据此接纳、预留的请求就可能分不到页。第 10 章分块 prefill 时一个请求的预留跨好几步，第 11 章重叠调度在处理上一步结果之前就接纳下一批，两种情况下这都会变成 `OutOfPagesError` 或断言失败（20 页、提示 `[A, A, C]`、`max_tokens` 1、6、8 就是这样）。测试 `test_a_duplicate_prefix_does_not_lock_the_cache_copy_its_row_does_not_point_at` 在本章直接检查：每一步之后，`available_size` = 总页数 − 各行指着的页。
#
# ??? note "深入：另一种正确的做法——改指缓存那份"
#
#     也可以让这一行改用缓存的那份：对缓存的页加一份持有，把页表这一行 `[old, already)` 改写成缓存的槽位，再放下自己那份。错误版本只做了后一半——账上改了，页表没改。改写页表时要小心：重叠调度下，上一批前向可能正读着这一行的页表，改写和被还掉的页的重新使用都要排在它之后。我们选更简单的：重复的那份留到请求结束，代价是这几页多占一会儿。
#
# ## 空闲时核对账目
#
# 请求全部结束时，没有任何一行持有页，每一页要么空闲，要么只被缓存持有一份。调度器空闲时调用 `run_when_idle()`，由它[核对](../glossary.md#integrity-check)：

# %% tags=["remove-input"]
listing("minisgl/scheduler/cache.py", "CacheManager.check_integrity")

# %% [markdown]
# 它抓的是少还一页这类不报错、只让池子一点点变小的错误。故意弄坏 `free_pages`，让它每次还页都漏掉最后一页，跑一个请求：

# %%
from minisgl.core import SamplingParams
from minibook.models import tiny_qwen3
from minisgl.llm import LLM

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
# 最后一个请求结束的那一步，`step()` 发现没有可跑的请求，调用 `run_when_idle()`，错误当场暴露。开头那个错误它抓不住：错误版本的每一页都有人记着，只是页表指错了地方；那个错误靠和 HF 对答案才看得见。
#
# ## 运行
#
# 本章的 main 在本章的树里真实跑出来的输出：

# %%
run("python examples/ch08_cache_manager.py")

# %% [markdown]
# 值得注意的地方：
#
# - 正确版本里 C 分到的页和第二个 A 的页没有重叠；错误版本里重叠 `[3, 4, 5]`，正是第二个 A 整页的提示。
# - 错误版本只有请求 1 与 HF 不一致：第一个 A 用自己的页，C 的 K/V 也没被别人写过。
# - 两个版本的“空闲时核对”都通过：账是平的，错的是页表。
#
# ## 与上游的差异
#
# 名字和接口与[上游](../glossary.md#upstream) mini-sglang 一致（`CacheManager`、`match_req`、`lock` / `unlock`、`allocate_paged`、`cache_req`、`check_integrity`，`BasePrefixCache` 的各个方法），差别有四处：
#
# - 我们的页按持有者计数，重复前缀的页留在行里直到请求结束；上游对 `[old_handle.cached_len, cached_len)` 调 `_free`，而行还指着它们，因为它的空闲页是一个不计数的张量。`python/minisgl/scheduler/cache.py` · `CacheManager.cache_req`
# - 我们请求没结束时遇到重复前缀就先不交、不锁缓存那份；上游照常锁住新句柄，因为它已经把行的重复页还掉了，空闲页多出的正好抵上锁住的。`python/minisgl/scheduler/cache.py` · `CacheManager.cache_req`
# - 我们的前缀缓存记 CPU 上的槽位，`page_size` 构造时传入；上游的值在 GPU 上，`page_size` 从全局上下文读，因为它的空闲页和页表写入都在 GPU 上做。`python/minisgl/kvcache/__init__.py` · `create_prefix_cache`
# - 我们空闲时还核对锁和持有份数；上游只核对“空闲 + 缓存 = 总数”。`python/minisgl/scheduler/cache.py` · `CacheManager.check_integrity`
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 空闲页和前缀缓存放在一起：`python/minisgl/scheduler/cache.py` · `CacheManager.__init__`（第 16～25 行）
# - 匹配、加锁、解锁：`python/minisgl/scheduler/cache.py` · `CacheManager.match_req`（第 27～30 行）、`python/minisgl/scheduler/cache.py` · `CacheManager.lock`（第 36～37 行）、`python/minisgl/scheduler/cache.py` · `CacheManager.unlock`（第 39～40 行）
# - 还能用多少，空闲页加可逐出的缓存（以 token 计）：`python/minisgl/scheduler/cache.py` · `CacheManager.available_size`（第 32～34 行）
# - 接纳时先锁后数：`python/minisgl/scheduler/prefill.py` · `PrefillAdder._try_allocate_one`（第 39～63 行）
# - prefill 之后交给缓存、结束时放下：`python/minisgl/scheduler/cache.py` · `CacheManager.cache_req`（第 55～79 行）
# - 空闲时核对：`python/minisgl/scheduler/cache.py` · `CacheManager.check_integrity`（第 81～91 行）、`python/minisgl/scheduler/scheduler.py` · `Scheduler.run_when_idle`（第 78～81 行）
# - 前缀缓存的接口：`python/minisgl/kvcache/base.py` · `BasePrefixCache`（第 67～135 行）
# - 不共享的缓存和按名字创建：`python/minisgl/kvcache/naive_cache.py` · `NaivePrefixCache`（第 16～45 行）、`python/minisgl/kvcache/__init__.py` · `create_prefix_cache`（第 61～62 行）
#
# ## 测试
#
# 本章的测试在 `tests/test_ch08_cache_manager.py`。不加载模型的一组用一个测试专用的字典前缀缓存检查记账：共享的页由两方持有、重复前缀留在行里、锁只在行指着的页上、页不够时只逐出没锁的页、随机负载下活着的行指着的页从不空闲、三种记账错误各被核对抓住。名字以 `test_llm_` 开头的一组接上调度器，和 HF 对照，其中一个用随机的共享前缀、紧的池子、页大小 1/2/4 和随机的 token 预算；它们由 `steps.py check 8` 跑。这里只跑前一组：

# %%
run("python -m pytest -q --color=no -p no:cacheprovider tests/test_ch08_cache_manager.py -k 'not llm'")

# %% [markdown]
# ## 怎么讲清楚
#
# CacheManager 是调度器一侧唯一管 KV 页的地方，靠一条规则记账：谁指着一页，谁就持有它一份。三个支撑：请求借用缓存的页时行加一份持有，结束时只放下自己那份；同一批里两个相同前缀，后算完的那份留在行里到结束，因为页表还指着它；锁只加在行指着的页上，能拿出的页才等于总页数减去各行指着的页。反例一个数就够：把重复的 3 页当场还掉，下一个请求正好分到这 3 页，第二个请求的输出就变了，而账目核对照样通过。

# %% [markdown]
# ## 练习
#
# 1. **一个先结束**。两个 A 同批，第一个只生成 1 个 token 就结束。如果第二个 A 的 `cache_req(finished=False)` 照常插入并锁住新句柄，锁住的是哪些页？为什么之前接纳的请求可能因此分不到页？
# 2. **先数后锁**。如果 `try_add_one` 先比较 `available_size` 再锁，会在什么情况下接纳一个放不下的请求？
# 3. **挑战：改指缓存那份**。按上面“另一种正确的做法”改写 `cache_req`，让 main 的错误版本变成正确的：要改哪几处记录？
#
# ??? success "参考答案"
#
#     1. 锁住的是第一个 A 留在缓存里的那几页：第二个 A 没指着它们，它们本来没锁、算在 `available_size` 里。锁住后它们既不能逐出、也不在任何预留里，`available_size` 少了这么多页，之前按旧的数预留的请求分页时就会不够。
#     2. 命中的页在锁之前算作“能逐出”。先数后锁会把它们算两次：既当成命中不用再分，又当成可以逐出腾地方，命中很长时就会多接纳。
#     3. 在 `cache_req_freeing_duplicates` 里放下自己那份之前，把页表这一行 `[old, already)` 写成缓存那份的槽位（`new.get_matched_indices()` 的对应段），其余不变：缓存那份加一份持有、行的记录改指它、锁住新句柄。再跑 main，第二个 A 与 HF 一致，C 分到的页和它的页表不再重叠。
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
# - CacheManager 组合 PageAllocator 和一个前缀缓存；前缀缓存是一个接口，按名字登记。
# - 页按持有者计数：谁指着一页，谁就持有它一份，最后一份放下时才回到空闲栈。
# - 同一批里重复的前缀留在行里直到请求结束；锁只加在行指着的页上，预留才不会漏。
# - `match_req` 不拿最后一个提示 token 匹配；接纳先锁再数。
# - 调度器空闲时 `check_integrity()`，漏还一页当场报错；页表指错了，要靠与 HF 对答案才看得见。
