"""第 8 章的测试：前缀缓存接口与登记表、页的共享持有、CacheManager 的记账与核对，
以及接上 CacheManager 的调度器（接纳预留最坏情况、空闲时核对、输出与 Hugging Face 一致）。"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
import torch

from minisgl.core import Req, SamplingParams
from minisgl.kvcache import (
    SUPPORTED_CACHE_MANAGER,
    BaseCacheHandle,
    BasePrefixCache,
    InsertResult,
    MatchResult,
    PageAllocator,
    SizeInfo,
    create_prefix_cache,
    pages_to_slots,
    slots_to_pages,
)
from minisgl.kvcache.naive_cache import NaivePrefixCache
from minisgl.scheduler.cache import CacheManager

# ================================================================ 测试用的前缀缓存
# 一个最直白的实现：每个整页前缀一条记录，键是到这一页为止的全部 token。它只用来
# 检验 CacheManager 的记账（第 9 章的radix 树是正式实现）。


@dataclass
class _Entry:
    slots: list[int]  # 这一页的 page_size 个槽位
    locks: int = 0
    children: int = 0
    tick: int = 0


@dataclass(frozen=True)
class _DictHandle(BaseCacheHandle):
    key: tuple = ()
    slots: tuple = ()

    def get_matched_indices(self) -> torch.Tensor:
        return torch.tensor(self.slots, dtype=torch.int32)


@dataclass
class DictPrefixCache(BasePrefixCache):
    page_size: int
    entries: dict = field(default_factory=dict)
    clock: int = 0

    def _walk(self, ids: list[int]) -> int:
        n = 0
        while n + self.page_size <= len(ids) and tuple(ids[: n + self.page_size]) in self.entries:
            n += self.page_size
        return n

    def _handle(self, ids: list[int], n: int) -> _DictHandle:
        ps = self.page_size
        slots = [s for k in range(ps, n + 1, ps) for s in self.entries[tuple(ids[:k])].slots]
        return _DictHandle(cached_len=n, key=tuple(ids[:n]), slots=tuple(slots))

    def match_prefix(self, input_ids):
        ids = input_ids.tolist()
        n = self._walk(ids)
        self.clock += 1
        for k in range(self.page_size, n + 1, self.page_size):
            self.entries[tuple(ids[:k])].tick = self.clock
        return MatchResult(self._handle(ids, n))

    def lock_handle(self, handle, unlock=False):
        for k in range(self.page_size, handle.cached_len + 1, self.page_size):
            entry = self.entries[handle.key[:k]]
            entry.locks += -1 if unlock else 1
            assert entry.locks >= 0

    def insert_prefix(self, input_ids, indices):
        ps, ids, slots = self.page_size, input_ids.tolist(), indices.tolist()
        end = len(ids) // ps * ps
        already = self._walk(ids[:end])
        self.clock += 1
        for k in range(already + ps, end + 1, ps):
            self.entries[tuple(ids[:k])] = _Entry(slots[k - ps : k], tick=self.clock)
            if k > ps:
                self.entries[tuple(ids[: k - ps])].children += 1
        return InsertResult(already, self._handle(ids, end))

    def evict(self, size):
        if size > self.size_info.evictable_size:
            raise RuntimeError("不够逐出")
        out = []
        while len(out) < size:
            key = min((k for k, e in self.entries.items() if e.locks == 0 and e.children == 0),
                      key=lambda k: self.entries[k].tick)
            out += self.entries.pop(key).slots
            if len(key) > self.page_size:
                self.entries[key[: -self.page_size]].children -= 1
        return torch.tensor(out, dtype=torch.int32)

    @property
    def size_info(self):
        locked = sum(1 for e in self.entries.values() if e.locks > 0)
        return SizeInfo((len(self.entries) - locked) * self.page_size, locked * self.page_size)

    def check_integrity(self):
        for key, entry in self.entries.items():
            assert len(key) % self.page_size == 0 and len(entry.slots) == self.page_size
            assert len(key) == self.page_size or key[: -self.page_size] in self.entries


@pytest.fixture
def dict_cache_type():
    """临时把 DictPrefixCache 登记成 "dict"，测完删掉。"""
    SUPPORTED_CACHE_MANAGER.register("dict")(DictPrefixCache)
    yield "dict"
    del SUPPORTED_CACHE_MANAGER["dict"]


# ================================================================ 帮手


def ids(*tokens: int) -> torch.Tensor:
    return torch.tensor(tokens, dtype=torch.int32)


def new_table(rows: int, width: int) -> torch.Tensor:
    return torch.full((rows, width), -1, dtype=torch.int32)


def admit(cm: CacheManager, row: int, prompt: torch.Tensor, max_tokens: int, uid: int = 0) -> Req:
    """按调度器的顺序接纳一个请求：匹配 → 锁住 → 行从命中的页开始。"""
    handle = cm.match_req(SimpleNamespace(input_ids=prompt)).cuda_handle
    cm.lock(handle)
    cm.attach_prefix(row, handle)
    return Req(input_ids=prompt.clone(), table_idx=row, cached_len=handle.cached_len,
               output_len=max_tokens, uid=uid, sampling_params=SamplingParams(max_tokens=max_tokens),
               cache_handle=handle)


def step(cm: CacheManager, reqs: list[Req], token: int = 7) -> torch.Tensor:
    """假装跑一步前向：分配槽位、推进记账、把"采样出的" token 拿回 CPU。"""
    out_loc = cm.allocate_paged(reqs)
    for req in reqs:
        req.complete_one()
        req.append_host(token)
    return out_loc


def rows_point_only_at_held_pages(cm: CacheManager, reqs: list[Req]) -> None:
    """活着的行指着的每一页都有人持有，而且不在空闲栈里。"""
    free = set(cm.allocator._free)
    for req in reqs:
        pages = cm.allocator.row_pages(req.table_idx)
        width = len(pages) * cm.page_size
        table_pages = (cm.page_table[req.table_idx, :width] // cm.page_size).tolist()
        assert table_pages[:: cm.page_size] == pages  # 页表和 CPU 记录一致
        assert all(cm.allocator._refs[p] >= 1 and p not in free for p in pages)


def only_borrowed_pages_are_locked(cm: CacheManager) -> None:
    """锁只加在有行指着的页上，所以"能拿出的页" = 总页数 - 各行指着的页（去重）。

    多锁一页没有行指着的缓存页，它就既不能逐出、也不归任何预留，available_size 凭空变小。
    """
    pointed = {p for row in range(len(cm.page_table)) for p in cm.allocator.row_pages(row)}
    assert cm.available_size == cm.num_pages - len(pointed)


# ================================================================ 接口与登记表


def test_registry_builds_naive_and_rejects_unknown_names_in_chinese():
    cache = create_prefix_cache("naive", 4)
    assert isinstance(cache, NaivePrefixCache) and isinstance(cache, BasePrefixCache)
    with pytest.raises(ValueError, match="不支持的前缀缓存类型 'radixx'.*'naive'"):
        create_prefix_cache("radixx", 4)


def test_naive_cache_never_matches_never_keeps_and_cannot_evict():
    cache = NaivePrefixCache(2)
    handle = cache.match_prefix(ids(1, 2, 3, 4, 5)).cuda_handle
    assert handle.cached_len == 0 and handle.get_matched_indices().dtype == torch.int32
    cache.lock_handle(handle)
    result = cache.insert_prefix(ids(1, 2, 3, 4), ids(8, 9, 10, 11))
    assert result.cached_len == 0 and result.handle.cached_len == 0  # 什么都没收下
    assert cache.size_info == SizeInfo(0, 0) and cache.evict(0).numel() == 0
    with pytest.raises(RuntimeError, match="逐不出 1 个 token"):
        cache.evict(1)


# ================================================================ 分配器：共享持有


@pytest.mark.parametrize("page_size", [1, 2, 4])
def test_slots_to_pages_inverts_pages_to_slots(page_size):
    pages = [5, 0, 3]  # 不相邻、不按大小排
    slots = pages_to_slots(pages, page_size)
    assert slots_to_pages(slots, page_size) == pages
    assert slots_to_pages(torch.tensor(slots, dtype=torch.int32), page_size) == pages  # 前缀缓存给的是张量
    assert slots_to_pages(torch.empty(0, dtype=torch.int32), page_size) == []


# 不满一页、页里断开、不从页首开始、页内乱序
@pytest.mark.parametrize("slots", [[8, 9, 10], [8, 9, 10, 12], [9, 10, 11, 12], [8, 10, 9, 11]])
def test_slots_to_pages_refuses_slots_that_are_not_whole_pages(slots):
    with pytest.raises(AssertionError, match="不是一页一页完整排好的"):
        slots_to_pages(slots, 4)


def test_share_prefix_adds_a_hold_and_writes_the_head_of_the_row():
    alloc = PageAllocator(6, 2, new_table(3, 8))
    cached = alloc.alloc_pages(2)  # 假装是前缀缓存持有的两页
    alloc.share_prefix(1, cached)
    assert [alloc._refs[p] for p in cached] == [2, 2] and alloc.row_pages(1) == cached
    assert alloc.page_table[1, :4].tolist() == [cached[0] * 2, cached[0] * 2 + 1,
                                                 cached[1] * 2, cached[1] * 2 + 1]
    free_before = alloc.num_free_pages
    alloc.free_slots(1, 4)  # 这一行结束：只放下自己的那一份
    assert [alloc._refs[p] for p in cached] == [1, 1] and alloc.num_free_pages == free_before
    alloc.free_pages(cached)  # 缓存也放下：这才回到空闲栈
    assert alloc.num_free_pages == 6 and alloc.num_holds == 0


def test_hold_pages_refuses_a_free_page_and_share_prefix_refuses_a_busy_row():
    alloc = PageAllocator(4, 1, new_table(2, 4))
    with pytest.raises(AssertionError, match="空闲页"):
        alloc.hold_pages([0])
    pages = alloc.alloc_pages(2)
    alloc.share_prefix(0, pages[:1])
    with pytest.raises(AssertionError, match="已经有页"):
        alloc.share_prefix(0, pages[1:])


# ================================================================ CacheManager


@pytest.mark.parametrize("page_size", [1, 4])
def test_naive_lifecycle_returns_every_page_and_passes_the_check(page_size):
    cm = CacheManager(16, page_size, new_table(3, 32), "naive")
    reqs = [admit(cm, row, torch.arange(1, 6 + row, dtype=torch.int32), 3, uid=row)
            for row in range(2)]
    step(cm, reqs)  # prefill
    for req in reqs:
        cm.cache_req(req, finished=False)
    step(cm, reqs)  # 一步 decode
    rows_point_only_at_held_pages(cm, reqs)
    assert cm.available_size == 16 - sum(len(cm.allocator.row_pages(r.table_idx)) for r in reqs)
    for req in reqs:
        cm.cache_req(req, finished=True)
        assert req.cache_handle is None
    cm.check_integrity()
    assert cm.allocator.num_free_pages == 16 and cm.available_size == 16


def test_integrity_check_catches_one_dropped_free(monkeypatch):
    cm = CacheManager(8, 2, new_table(2, 16), "naive")
    req = admit(cm, 0, ids(1, 2, 3, 4, 5), 2)
    step(cm, [req])
    free_pages = cm.allocator.free_pages
    # 一个有毛病的 free：还页时把最后一页"忘了"
    monkeypatch.setattr(cm.allocator, "free_pages", lambda pages: free_pages(list(pages)[:-1]))
    cm.cache_req(req, finished=True)
    with pytest.raises(RuntimeError, match=r"空闲 7 页 \+ 前缀缓存 0 页 = 7 页，应当等于总页数 8"):
        cm.check_integrity()


def test_integrity_check_catches_a_handle_left_locked(dict_cache_type):
    cm = CacheManager(8, 2, new_table(2, 16), dict_cache_type)
    req = admit(cm, 0, ids(1, 2, 3, 4, 5), 2)
    step(cm, [req])
    cm.cache_req(req, finished=False)
    cm.lock(req.cache_handle)  # 多锁了一次，结束时只解一次
    cm.cache_req(req, finished=True)
    with pytest.raises(RuntimeError, match="4 个 token 被锁住"):
        cm.check_integrity()


def test_integrity_check_catches_a_hold_left_on_a_cached_page(dict_cache_type, monkeypatch):
    cm = CacheManager(8, 2, new_table(2, 16), dict_cache_type)
    req = admit(cm, 0, ids(1, 2, 3, 4, 5), 2)
    step(cm, [req])
    cm.cache_req(req, finished=False)
    free_pages = cm.allocator.free_pages
    monkeypatch.setattr(cm.allocator, "free_pages", lambda pages: free_pages(list(pages)[1:]))
    cm.cache_req(req, finished=True)  # 第一页在缓存里：页数对得上，持有份数对不上
    with pytest.raises(RuntimeError, match="2 页上共有 3 份持有"):
        cm.check_integrity()


def test_a_match_shares_the_cached_pages_and_skips_the_last_prompt_token(dict_cache_type):
    cm = CacheManager(12, 2, new_table(3, 16), dict_cache_type)
    prompt = ids(5, 6, 7, 8, 9, 10, 11)
    first = admit(cm, 0, prompt, 2)
    step(cm, [first])
    cm.cache_req(first, finished=False)  # 存下 [5..10] 三页
    cached_pages = cm.allocator.row_pages(0)[:3]
    assert [cm.allocator._refs[p] for p in cached_pages] == [2, 2, 2]
    cm.cache_req(first, finished=True)
    # 同一个提示再来：最后一个 token 要重算，所以只命中 [5..8] 两页（6 个里对齐到整页的 4 个）
    again = admit(cm, 1, ids(5, 6, 7, 8, 9), 2)
    assert again.cached_len == 4 and cm.allocator.row_pages(1) == cached_pages[:2]
    assert cm.page_table[1, :4].tolist() == cm.page_table[0, :4].tolist()
    assert [cm.allocator._refs[p] for p in cached_pages] == [2, 2, 1]
    out_loc = step(cm, [again])
    assert len(out_loc) == 1 and out_loc.item() // 2 not in cached_pages  # 只算没命中的一个
    cm.cache_req(again, finished=True)
    cm.check_integrity()


def test_duplicate_prefix_in_one_batch_stays_with_its_row_until_it_ends(dict_cache_type):
    """上游在这里把第二个请求的页还回空闲栈，而它的行还指着这些页；我们不还。"""
    cm = CacheManager(10, 2, new_table(3, 16), dict_cache_type)
    prompt = ids(1, 2, 3, 4, 5)
    a, b = admit(cm, 0, prompt, 4, uid=0), admit(cm, 1, prompt, 4, uid=1)  # 同一批：都没命中
    step(cm, [a, b])
    cm.cache_req(a, finished=False)  # a 的两页进缓存
    b_pages = cm.allocator.row_pages(1)
    cm.cache_req(b, finished=False)  # 缓存里已经有了：b 的页不交出去，也不还
    assert all(cm.allocator._refs[p] == 1 for p in b_pages)
    only_borrowed_pages_are_locked(cm)
    # 第三个请求把空闲页全部要走：绝不能拿到 b 还指着的页
    c = admit(cm, 2, ids(9, 9, 9, 9, 9, 9, 9, 9), 2, uid=2)
    step(cm, [c])
    assert not set(cm.allocator.row_pages(2)) & set(b_pages)
    rows_point_only_at_held_pages(cm, [a, b, c])
    for req in (a, b, c):
        cm.cache_req(req, finished=True)
    cm.check_integrity()


def test_a_duplicate_prefix_does_not_lock_the_cache_copy_its_row_does_not_point_at(dict_cache_type):
    """a、b 同一批、同一个前缀；a 只生成 1 个就结束，它的页进缓存、可以逐出。b 接着 decode：
    它指着自己的那份，缓存的那份不能被 b 锁住，否则这 2 页既不能逐出、也没人预留过。"""
    cm = CacheManager(10, 2, new_table(3, 16), dict_cache_type)
    prompt = ids(1, 2, 3, 4, 5)
    a, b = admit(cm, 0, prompt, 1, uid=0), admit(cm, 1, prompt, 6, uid=1)
    step(cm, [a, b])
    cm.cache_req(a, finished=True)  # a 结束：缓存收下它的 2 页，没有锁
    assert cm.prefix_cache.size_info == SizeInfo(4, 0)
    b_pages = cm.allocator.row_pages(1)
    cm.cache_req(b, finished=False)
    only_borrowed_pages_are_locked(cm)
    assert cm.prefix_cache.size_info == SizeInfo(4, 0) and cm.available_size == 10 - 3
    step(cm, [b])
    cm.cache_req(b, finished=True)  # b 结束：重复的 2 页随行放下，缓存收下它的第 3 页
    assert [cm.allocator._refs[p] for p in b_pages] == [0, 0, 1]
    cm.check_integrity()
    assert cm.allocator.num_free_pages == 10 - 3


def test_allocate_evicts_unlocked_pages_only_when_free_pages_run_short(dict_cache_type):
    cm = CacheManager(6, 1, new_table(3, 8), dict_cache_type)
    a = admit(cm, 0, ids(1, 2, 3), 1)
    step(cm, [a])
    cm.cache_req(a, finished=True)  # 缓存 3 页，没锁
    b = admit(cm, 1, ids(4, 5), 1, uid=1)
    step(cm, [b])
    cm.cache_req(b, finished=False)  # b 的 2 页也进缓存，锁住
    assert cm.allocator.num_free_pages == 1 and cm.available_size == 4
    c = admit(cm, 2, ids(6, 7, 8, 9), 1, uid=2)
    step(cm, [c])  # 要 4 页：逐出 a 的 3 页，b 锁住的 2 页不动
    assert cm.prefix_cache.size_info == SizeInfo(0, 2)
    rows_point_only_at_held_pages(cm, [b, c])
    for req in (b, c):
        cm.cache_req(req, finished=True)
    cm.check_integrity()


def test_random_workload_never_frees_a_page_a_row_points_at(dict_cache_type):
    rng = random.Random(0)
    for trial in range(30):
        ps, rows = rng.choice([1, 2, 4]), 4
        cm = CacheManager(40, ps, new_table(rows, 48), dict_cache_type)
        pending, live, free_rows = 0, [], list(range(rows))
        vocab = [1, 2, 3]  # 词表很小：提示之间经常有相同的前缀
        for _ in range(60):
            if free_rows and rng.random() < 0.4:
                prompt = torch.tensor([rng.choice(vocab) for _ in range(rng.randint(1, 12))],
                                      dtype=torch.int32)
                handle = cm.match_req(SimpleNamespace(input_ids=prompt)).cuda_handle
                cm.lock(handle)  # 先锁再数：锁住的页不再算"能逐出"
                need = cm.allocator.pages_needed(handle.cached_len, len(prompt) + 4) + sum(
                    cm.allocator.pages_needed(r.cached_len, r.max_device_len) for r in live)
                cm.unlock(handle)
                if cm.available_size >= need:
                    req = admit(cm, free_rows.pop(), prompt, rng.randint(1, 4), uid=pending)
                    pending += 1
                    step(cm, [req])
                    cm.cache_req(req, finished=False)
                    live.append(req)
            runnable = [r for r in live if r.can_decode]
            if runnable:
                step(cm, runnable, token=rng.choice(vocab))
            for req in [r for r in live if not r.can_decode or rng.random() < 0.1]:
                live.remove(req)
                cm.cache_req(req, finished=True)
                free_rows.append(req.table_idx)
            rows_point_only_at_held_pages(cm, live)
            only_borrowed_pages_are_locked(cm)
        for req in live:
            cm.cache_req(req, finished=True)
        cm.check_integrity()


# ================================================================ 接上调度器


def run_traced(llm, prompts, params):
    """一步步跑完，记下每步的 (在跑, 已用页, 预留页) 和每步 prefill 真正算的 token 数。"""
    for uid, (prompt, sp) in enumerate(zip(prompts, params)):
        llm.add_req(uid, torch.tensor(prompt, dtype=torch.int32), sp)
    outs, trace, computed = {uid: [] for uid in range(len(prompts))}, [], 0
    cm = llm.cache_manager
    while llm.runnable:
        batch_input = llm._schedule_next_batch()
        assert batch_input is not None
        if batch_input.batch.is_prefill:
            computed += sum(r.extend_len for r in batch_input.batch.reqs)
        for out in llm._process_last_data((batch_input, llm._forward(batch_input))):
            outs[out.uid].append(out.next_token)
        used = cm.num_pages - cm.allocator.num_free_pages
        cached = cm.prefix_cache.size_info.evictable_size // cm.page_size
        trace.append((len(llm.decode_manager.running), used - cached,
                      used - cached + llm.decode_manager.inflight_pages(cm.page_size)))
    llm.run_when_idle()
    return [outs[uid] for uid in range(len(prompts))], trace, computed


@pytest.fixture(scope="module")
def models():
    from minibook.models import smollm2, tiny_qwen3

    return {"smollm2": smollm2(), "tiny_qwen3": tiny_qwen3()}


@pytest.mark.parametrize("name,page_size", [("tiny_qwen3", 1), ("tiny_qwen3", 4), ("smollm2", 4)])
def test_llm_small_pool_admits_by_worst_case_and_output_equals_hf(models, name, page_size):
    from minibook.hf import hf_greedy
    from minisgl.llm import LLM

    path = models[name]
    total = 48 // page_size
    llm = LLM(path, max_running_req=8, page_size=page_size, num_page_override=total,
              max_seq_len_override=64, cache_type="naive")  # 不缓存的路径（第 9 章起默认换成 radix）
    rng = random.Random(page_size)
    prompts = [[rng.randrange(100, 2000) for _ in range(rng.randint(3, 9))] for _ in range(5)]
    max_tokens = [rng.randint(4, 16) for _ in prompts]
    outs, trace, _ = run_traced(llm, prompts, [SamplingParams(max_tokens=n, ignore_eos=True)
                                               for n in max_tokens])
    for prompt, out, n in zip(prompts, outs, max_tokens):
        assert out == hf_greedy(path, prompt, n)
    # 任何时刻：实际用的 ≤ 预留的 ≤ 池子；页数才是瓶颈（8 行从来没用满）
    assert all(used <= reserved <= total for _, used, reserved in trace)
    assert 1 < max(running for running, _, _ in trace) < 5
    assert llm.page_allocator.num_free_pages == total
    llm.shutdown()


def test_llm_running_requests_keep_their_reservation(models):
    """第二个请求的提示现在就放得下，但它最坏要的页加上第一个请求还要的页放不下：等。"""
    from minisgl.llm import LLM

    llm = LLM(models["tiny_qwen3"], max_running_req=4, page_size=1, num_page_override=30,
              max_seq_len_override=32)
    params = [SamplingParams(max_tokens=16, ignore_eos=True), SamplingParams(max_tokens=10, ignore_eos=True)]
    _, trace, _ = run_traced(llm, [[5] * 8, [6] * 8], params)  # 最坏 23 页 + 17 页 > 30 页
    assert max(running for running, _, _ in trace) == 1
    assert len(trace) == 16 + 10  # 一个接一个：每个请求 1 步 prefill + (max_tokens - 1) 步 decode
    llm.shutdown()


def test_llm_shared_prefixes_are_computed_once_and_output_equals_hf(models, dict_cache_type):
    """用测试里的 DictPrefixCache：命中的页被新请求借用，输出仍与 HF 一致；池小到要逐出。"""
    from minibook.hf import hf_greedy
    from minisgl.llm import LLM

    path = models["tiny_qwen3"]
    llm = LLM(path, max_running_req=2, page_size=2, num_page_override=40,
              max_seq_len_override=64, cache_type=dict_cache_type)
    system = list(range(300, 320))  # 20 个 token 的共同前缀
    prompts = [system + [400 + i, 500 + i, 600 + i] for i in range(5)]
    params = [SamplingParams(max_tokens=6, ignore_eos=True)] * 5
    outs, _, computed = run_traced(llm, prompts, params)
    for prompt, out in zip(prompts, outs):
        assert out == hf_greedy(path, prompt, 6)
    # 前两个同批、都没命中（23 + 23）；后三个各命中 20 个，只算 3 个
    assert computed == 2 * 23 + 3 * 3
    cm = llm.cache_manager
    assert cm.prefix_cache.size_info.protected_size == 0
    assert cm.allocator.num_free_pages + cm.prefix_cache.size_info.total_size // 2 == 40
    llm.shutdown()


@pytest.mark.parametrize("page_size", [1, 2, 4])
def test_llm_random_shared_prefixes_in_tight_pools_equal_hf(models, dict_cache_type, page_size):
    """随机提示（两个共同前缀、常有完全相同的）、紧的池子、随机的 prefill 预算和 max_tokens：
    每一步之后锁只在行指着的页上；输出与 HF 一致；空闲时核对通过。"""
    from minibook.hf import hf_greedy
    from minisgl.llm import LLM

    path = models["tiny_qwen3"]
    rng = random.Random(100 + page_size)
    for _ in range(2):
        bases = [[rng.randrange(100, 2000) for _ in range(rng.randint(2, 8))] for _ in range(2)]
        prompts = [rng.choice(bases) + [rng.randrange(100, 2000) for _ in range(rng.choice([0, 0, 2, 4]))]
                   for _ in range(6)]
        max_tokens = [rng.choice([1, 1, 3, 6, 8]) for _ in prompts]
        # 池子只比最大的一个请求多一点：接纳经常要等，缓存经常要逐出
        worst = max(-(-(len(p) + n - 1) // page_size) for p, n in zip(prompts, max_tokens))
        llm = LLM(path, max_running_req=4, page_size=page_size,
                  num_page_override=worst + rng.randint(0, 8 // page_size),
                  max_seq_len_override=32, cache_type=dict_cache_type,
                  max_extend_tokens=rng.choice([4, 8, 64]))
        for uid, (prompt, n) in enumerate(zip(prompts, max_tokens)):
            llm.add_req(uid, torch.tensor(prompt, dtype=torch.int32),
                        SamplingParams(max_tokens=n, ignore_eos=True))
        outs = {uid: [] for uid in range(len(prompts))}
        while llm.runnable:
            for out in llm.step():
                outs[out.uid].append(out.next_token)
            only_borrowed_pages_are_locked(llm.cache_manager)
        llm.cache_manager.check_integrity()
        llm.shutdown()
        for uid, (prompt, n) in enumerate(zip(prompts, max_tokens)):
            assert outs[uid] == hf_greedy(path, prompt, n), (prompts, max_tokens, uid)


def test_llm_dropping_one_free_is_caught_when_the_scheduler_goes_idle(models, monkeypatch):
    from minisgl.llm import LLM

    llm = LLM(models["tiny_qwen3"], max_running_req=2, page_size=2, num_page_override=16,
              max_seq_len_override=32, cache_type="naive")  # 不缓存的路径（第 9 章起默认换成 radix）
    free_pages = llm.page_allocator.free_pages
    monkeypatch.setattr(llm.page_allocator, "free_pages",
                        lambda pages: free_pages(list(pages)[:-1]))  # 每次还页都漏掉最后一页
    with pytest.raises(RuntimeError, match="有 1 页没有还回来"):
        llm.generate([[1, 2, 3, 4]], SamplingParams(max_tokens=3, ignore_eos=True))
    llm.shutdown()


def test_llm_abort_of_a_running_request_returns_its_pages(models):
    from minisgl.llm import LLM

    llm = LLM(models["tiny_qwen3"], max_running_req=2, page_size=4, num_page_override=16,
              max_seq_len_override=32, cache_type="naive")  # 不缓存的路径（第 9 章起默认换成 radix）
    llm.add_req(0, torch.tensor([1, 2, 3, 4, 5], dtype=torch.int32), SamplingParams(max_tokens=9))
    llm.step()
    llm.step()
    assert llm.page_allocator.num_free_pages < 16
    assert llm.abort_req(0) and not llm.runnable
    llm.step()  # 空闲：核对账目
    assert llm.page_allocator.num_free_pages == 16
    llm.shutdown()
