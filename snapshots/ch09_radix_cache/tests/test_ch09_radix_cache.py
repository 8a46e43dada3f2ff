"""第 9 章的测试：radix 前缀缓存的语义、上游修过的四个 bug、随机操作序列对照一个朴素参考。"""

from __future__ import annotations

from itertools import count

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from minisgl.kvcache.radix_cache import RadixCacheHandle, RadixPrefixCache


def ids(*tokens: int) -> torch.Tensor:
    return torch.tensor(tokens, dtype=torch.int32)


class Pages:
    """发新页的槽位：第 p 页是 p*ps .. p*ps+ps-1，和 PageAllocator 的规则一样；页号从不重复。"""

    def __init__(self, page_size: int) -> None:
        self.ps, self._next = page_size, count(1)

    def slots(self, n_tokens: int) -> torch.Tensor:
        assert n_tokens % self.ps == 0
        pages = [next(self._next) for _ in range(n_tokens // self.ps)]
        return torch.tensor([p * self.ps + j for p in pages for j in range(self.ps)], dtype=torch.int32)


def handle_of(cache: RadixPrefixCache, tokens: torch.Tensor) -> RadixCacheHandle:
    return cache.match_prefix(tokens).cuda_handle


# ---------------------------------------------------------------- 基本语义


def test_match_splits_a_node_and_returns_page_aligned_prefix():
    cache, pages = RadixPrefixCache(page_size=2), Pages(2)
    slots = pages.slots(6)
    assert cache.insert_prefix(ids(1, 2, 3, 4, 5, 6, 7), torch.cat([slots, ids(0)])).cached_len == 0
    assert cache.size_info == (6, 0)  # 7 个 token 只插进 3 整页

    h = handle_of(cache, ids(1, 2, 3, 9, 9))  # 共同前缀 3 个 token，按页向下取整是 2
    assert h.cached_len == 2 and h.get_matched_indices().tolist() == slots[:2].tolist()
    assert len(cache.root.children) == 1 and h.node.length == 2 and len(h.node.children) == 1
    assert cache.size_info == (6, 0)  # 切分不改大小
    cache.check_integrity()

    assert handle_of(cache, ids(1)).cached_len == 0  # 不足一页：什么都不命中
    assert handle_of(cache, ids(7, 7)).cached_len == 0


def test_insert_reports_what_was_already_cached():
    cache, pages = RadixPrefixCache(page_size=1), Pages(1)
    first = pages.slots(4)
    cache.insert_prefix(ids(1, 2, 3, 4), first)
    res = cache.insert_prefix(ids(1, 2, 8, 9), pages.slots(4))
    assert res.cached_len == 2 and res.handle.cached_len == 4
    # 已经在树里的前两个 token 用的是树里原来的槽位，不是这次传进来的
    assert res.handle.get_matched_indices()[:2].tolist() == first[:2].tolist()
    assert cache.size_info == (6, 0)
    cache.check_integrity()


def test_evict_takes_least_recently_used_unlocked_leaves_first():
    cache, pages = RadixPrefixCache(page_size=1), Pages(1)
    a, b, c = pages.slots(3), pages.slots(3), pages.slots(3)
    cache.insert_prefix(ids(1, 1, 1), a)
    cache.insert_prefix(ids(2, 2, 2), b)
    cache.insert_prefix(ids(3, 3, 3), c)
    handle_of(cache, ids(1, 1, 1))  # 刷新 1 1 1：现在最久没用的是 2 2 2
    assert cache.evict(2).tolist() == b.tolist()  # 整个叶子走，3 个 ≥ 2
    assert cache.evict(3).tolist() == c.tolist()
    assert cache.size_info == (3, 0)
    cache.check_integrity()


def test_evict_climbs_to_a_parent_that_becomes_a_leaf():
    cache, pages = RadixPrefixCache(page_size=1), Pages(1)
    cache.insert_prefix(ids(1, 2), pages.slots(2))
    cache.insert_prefix(ids(1, 2, 3), pages.slots(3))  # 树：[1 2] → [3]
    cache.insert_prefix(ids(5), pages.slots(1))
    out = cache.evict(3)  # [3] 最旧……不对，[5] 最新；先 [3]，然后成了叶子的 [1 2]
    assert sorted(out.tolist()) == [1, 2, 5] and cache.size_info == (1, 0)
    cache.check_integrity()


def test_evict_errors_and_zero():
    cache = RadixPrefixCache(page_size=1)
    assert cache.evict(0).numel() == 0
    cache.insert_prefix(ids(1, 2), ids(4, 5))
    cache.lock_handle(handle_of(cache, ids(1, 2)))
    with pytest.raises(RuntimeError, match="只有 0 个可以逐出"):
        cache.evict(1)


def test_bad_page_size_is_a_chinese_error():
    with pytest.raises(ValueError, match="page_size"):
        RadixPrefixCache(page_size=0)


def test_a_locked_handle_survives_a_split_of_its_node():
    cache, pages = RadixPrefixCache(page_size=2), Pages(2)
    slots = pages.slots(6)
    long = cache.insert_prefix(ids(1, 2, 3, 4, 5, 6), slots).handle
    cache.lock_handle(long)
    assert cache.size_info == (0, 6)
    short = handle_of(cache, ids(1, 2, 3, 4, 0, 0))  # 把那个节点切成 4 + 2
    assert short.cached_len == 4 and cache.size_info == (0, 6)
    assert long.get_matched_indices().tolist() == slots.tolist()
    cache.check_integrity()
    cache.lock_handle(long, unlock=True)
    assert cache.size_info == (6, 0)
    cache.check_integrity()


# ---------------------------------------------------------------- 上游修过的四个 bug


def test_regression_match_returns_the_matched_node_not_the_root():
    """上游 #44/#46：match_prefix 把沿路往上走用的变量当成结果，句柄里存的成了根节点。

    句柄指向根时，锁它什么都锁不住，get_matched_indices 也是空的。
    """
    cache, pages = RadixPrefixCache(page_size=1), Pages(1)
    slots = pages.slots(5)
    cache.insert_prefix(ids(1, 2, 3, 4, 5), slots)
    h = handle_of(cache, ids(1, 2, 3, 9))
    assert h.cached_len == 3 and not h.node.is_root()
    assert h.get_matched_indices().tolist() == slots[:3].tolist()
    cache.lock_handle(h)
    assert cache.size_info.protected_size == 3


def _lock_protects(cache: RadixPrefixCache, pages: Pages) -> None:
    """锁住一个指向叶子的句柄后，把能逐出的全逐出掉，句柄的槽位必须还在树里。"""
    slots = pages.slots(4)
    cache.insert_prefix(ids(7, 7, 7, 7), slots)
    h = handle_of(cache, ids(7, 7, 7, 7))
    assert h.node.is_leaf()
    cache.lock_handle(h)
    assert cache.size_info.protected_size == 4, "句柄自己的节点没被锁住"
    if cache.size_info.evictable_size:
        cache.evict(cache.size_info.evictable_size)
    assert handle_of(cache, ids(7, 7, 7, 7)).get_matched_indices().tolist() == slots.tolist()
    cache.lock_handle(h, unlock=True)
    assert cache.size_info == (4, 0)


class _SkipOwnNode(RadixPrefixCache):
    """上游出过的错：锁从 handle.node 的父节点开始，句柄自己的节点没锁上。"""

    def lock_handle(self, handle, unlock=False):
        parent = handle.node.parent
        if not parent.is_root():
            super().lock_handle(RadixCacheHandle(handle.cached_len - handle.node.length, parent), unlock)


def test_regression_lock_and_unlock_include_the_handles_own_node():
    _lock_protects(RadixPrefixCache(page_size=2), Pages(2))
    with pytest.raises(AssertionError, match="没被锁住"):  # 这条检查抓得住上游那个错误
        _lock_protects(_SkipOwnNode(page_size=2), Pages(2))


def _insert_survives_row_reuse(cache: RadixPrefixCache) -> None:
    """插入时传进来的是页表一行的切片；那一行给下一个请求用了，树里的槽位不能跟着变。"""
    page_table = torch.zeros(2, 8, dtype=torch.int32)
    page_table[0, :4] = ids(8, 9, 10, 11)
    cache.insert_prefix(ids(1, 2, 3, 4), page_table[0, :4])
    page_table[0, :4] = ids(20, 21, 22, 23)  # 第 0 行换了主人
    got = handle_of(cache, ids(1, 2, 3, 4)).get_matched_indices().tolist()
    assert got == [8, 9, 10, 11], f"树里的槽位跟着页表变了：{got}"


class _StoresView(RadixPrefixCache):
    """上游出过的错：存的是页表那一行的视图，不是拷贝。"""

    def insert_prefix(self, input_ids, indices):
        res = super().insert_prefix(input_ids, indices)
        node = res.handle.node
        node.value = indices[res.handle.cached_len - node.length : res.handle.cached_len]
        return res


def test_regression_insert_stores_a_copy_of_the_page_table_row():
    _insert_survives_row_reuse(RadixPrefixCache(page_size=2))
    with pytest.raises(AssertionError, match="跟着页表变了"):
        _insert_survives_row_reuse(_StoresView(page_size=2))


def test_regression_evict_counts_tokens_not_pages():
    """上游 #80：页大小 > 1 时，按页数去逐出（把页数当 token 数）会逐出得太少。

    evict 的参数和返回都按 token 计：要 5 个 token 就得到至少 5 个，而且是整页。
    """
    cache, pages = RadixPrefixCache(page_size=4), Pages(4)
    for first in range(4):
        cache.insert_prefix(ids(first, 0, 0, 0), pages.slots(4))  # 4 个叶子，每个一页
    out = cache.evict(5)
    assert len(out) == 8 and len(out) % 4 == 0  # 两页：一页只有 4 个 token，不够 5 个
    assert cache.size_info == (8, 0)
    assert len(cache.evict(1)) == 4  # 要 1 个 token 也得整页走
    cache.check_integrity()


# ---------------------------------------------------------------- check_integrity 抓得住


@pytest.mark.parametrize("damage, message", [
    (lambda c, n: setattr(c, "evictable_size", c.evictable_size + 1), "记账不符"),
    (lambda c, n: setattr(n, "ref_count", 1), "孩子们的计数"),  # 孩子锁着、父亲没锁
    (lambda c, n: setattr(n, "value", n.value[:1]), "槽位有 1 个"),
    (lambda c, n: setattr(n, "value", n.value.flip(0)), "不是一整页"),
    (lambda c, n: setattr(n, "key", [9] + n.key[1:]), "孩子表"),
    (lambda c, n: setattr(n, "value", c.root.children[(1, 2)].value.clone()), "出现了两次"),
])
def test_check_integrity_catches_each_kind_of_damage(damage, message):
    cache, pages = RadixPrefixCache(page_size=2), Pages(2)
    cache.insert_prefix(ids(1, 2), pages.slots(2))
    cache.insert_prefix(ids(1, 2, 3, 4), pages.slots(4))
    cache.check_integrity()
    leaf = cache.root.children[(1, 2)].children[(3, 4)]
    damage(cache, leaf)
    with pytest.raises(RuntimeError, match=message):
        cache.check_integrity()


def test_check_integrity_catches_a_page_repeated_inside_one_node():
    cache, pages = RadixPrefixCache(page_size=2), Pages(2)
    cache.insert_prefix(ids(7, 8, 9, 10), pages.slots(4))  # 一个节点，两页
    cache.check_integrity()
    node = cache.root.children[(7, 8)]
    node.value = torch.cat([node.value[:2], node.value[:2]])  # 每页都是整页，但同一页出现两次
    with pytest.raises(RuntimeError, match="出现了两次"):
        cache.check_integrity()


# ---------------------------------------------------------------- 随机操作序列 vs. 朴素参考


class Reference:
    """朴素参考：按整页记住每段缓存过的前缀（前缀 → 它最后一页的槽位、锁计数、最近访问时刻）。

    没有树、没有切分：命中 = 最长的、每一页前缀都在字典里的前缀。
    """

    def __init__(self, ps: int) -> None:
        self.ps, self.clock = ps, 0
        self.pages: dict[tuple[int, ...], list[int]] = {}
        self.locks: dict[tuple[int, ...], int] = {}
        self.access: dict[tuple[int, ...], int] = {}

    def _prefixes(self, seq: tuple[int, ...]):
        return [seq[:end] for end in range(self.ps, len(seq) - len(seq) % self.ps + 1, self.ps)]

    def match(self, seq: tuple[int, ...]) -> tuple[int, list[int]]:
        self.clock += 1
        slots, length = [], 0
        for p in self._prefixes(seq):
            if p not in self.pages:
                break
            self.access[p] = self.clock
            slots += self.pages[p]
            length = len(p)
        return length, slots

    def insert(self, seq: tuple[int, ...], slots: list[int]) -> int:
        self.clock += 1
        cached = 0
        for p in self._prefixes(seq):
            if p in self.pages:
                cached = len(p)
            else:
                self.pages[p] = slots[len(p) - self.ps : len(p)]
                self.locks[p] = 0
            self.access[p] = self.clock
        return cached

    def lock(self, seq: tuple[int, ...], delta: int) -> None:
        for p in self._prefixes(seq):
            self.locks[p] += delta

    def sizes(self) -> tuple[int, int]:
        locked = sum(1 for p in self.pages if self.locks[p] > 0)
        return (len(self.pages) - locked) * self.ps, locked * self.ps

    def is_leaf(self, p: tuple[int, ...]) -> bool:
        return not any(len(q) == len(p) + self.ps and q[: len(p)] == p for q in self.pages)

    def evict_pages_lru(self, size: int) -> list[tuple[tuple[int, ...], int]]:
        """一页一页地逐出：每次拿走最久没访问、没锁住的叶子页，直到够 size 个 token。

        叶子页的访问时刻两两不同（同一时刻访问的页在同一条路径上），所以顺序是唯一的。
        返回 [(前缀, 访问时刻)]。
        """
        gone = []
        while len(gone) * self.ps < size:
            leaves = [p for p in self.pages if self.locks[p] == 0 and self.is_leaf(p)]
            victim = min(leaves, key=lambda p: self.access[p])
            gone.append((victim, self.access[victim]))
            self.remove(victim)
        return gone

    def remove(self, p: tuple[int, ...]) -> None:
        del self.pages[p], self.locks[p], self.access[p]


# 序列 = 三条固定序列之一的前 cut 个 token + 随机的尾巴：前缀常常相同，常常在节点中间分岔
BASES = [[0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2], [0, 1, 2, 2, 2, 2, 1, 1, 0, 0, 1, 1], [1] * 12]
sequence = st.builds(lambda b, cut, tail: tuple(BASES[b][:cut] + tail), st.integers(0, 2),
                     st.integers(0, 12), st.lists(st.integers(0, 2), max_size=4))
op = st.one_of(
    st.tuples(st.just("insert"), sequence),
    st.tuples(st.just("match"), sequence),
    st.tuples(st.just("match_lock"), sequence),
    st.tuples(st.just("unlock"), st.integers(0, 100)),
    st.tuples(st.just("evict"), st.integers(0, 30)),
)


@settings(max_examples=200, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(page_size=st.sampled_from([1, 2, 4]), ops=st.lists(op, max_size=40))
def test_random_operations_agree_with_a_plain_reference(page_size, ops):
    cache, ref, pages = RadixPrefixCache(page_size), Reference(page_size), Pages(page_size)
    locked: list[tuple[RadixCacheHandle, tuple[int, ...]]] = []
    for kind, arg in ops:
        if kind == "insert":
            seq = tuple(arg)
            n = len(seq) - len(seq) % page_size
            slots = torch.cat([pages.slots(n), torch.zeros(len(seq) - n, dtype=torch.int32)])
            res = cache.insert_prefix(torch.tensor(seq, dtype=torch.int32), slots)
            assert res.cached_len == ref.insert(seq, slots.tolist())
            assert res.handle.cached_len == n
        elif kind in ("match", "match_lock"):
            seq = tuple(arg)
            h = cache.match_prefix(torch.tensor(seq, dtype=torch.int32)).cuda_handle
            length, slots = ref.match(seq)
            assert (h.cached_len, h.get_matched_indices().tolist()) == (length, slots)
            if kind == "match_lock":
                cache.lock_handle(h)
                ref.lock(seq[:length], +1)
                locked.append((h, seq[:length]))
        elif kind == "unlock" and locked:
            h, seq = locked.pop(arg % len(locked))
            cache.lock_handle(h, unlock=True)
            ref.lock(seq, -1)
        elif kind == "evict":
            size = min(arg, cache.size_info.evictable_size)
            out = cache.evict(size).tolist()
            assert len(out) >= size and len(out) % page_size == 0
            slot_to_prefix = {s: p for p, sl in ref.pages.items() for s in sl}
            evicted = {slot_to_prefix[s] for s in out}  # KeyError = 逐出了不存在的槽位
            assert len(evicted) * page_size == len(out)
            lru = ref.evict_pages_lru(size)
            assert {p for p, _ in lru} <= evicted, "没有按最久未用的顺序逐出"
            # radix 按节点整个逐出，可能多走几页：它们和参考最后拿走的那页在同一个节点里，
            # 访问时刻相同、没被锁住；拿走之后剩下的前缀仍然一页接一页连着
            extra = evicted - {p for p, _ in lru}
            for p in extra:
                assert ref.locks[p] == 0 and ref.access[p] == lru[-1][1]
                ref.remove(p)
            assert all(p[:-page_size] in ref.pages for p in ref.pages if len(p) > page_size)
        cache.check_integrity()
        assert tuple(cache.size_info) == ref.sizes()


# ---------------------------------------------------------------- 接进调度器


@pytest.fixture(scope="module")
def models():
    from minibook.models import smollm2, tiny_qwen3

    return {"smollm2": smollm2(), "tiny_qwen3": tiny_qwen3()}


def prefill_hits(llm, prompts, params, one_by_one: bool) -> list[int]:
    """跑完 prompts，返回每个请求 prefill 时命中的 token 数（按 uid）。"""
    hits: dict[int, int] = {}
    forward = llm._forward

    def record(forward_input):
        if forward_input.batch.is_prefill:
            hits.update({r.uid: r.cached_len for r in forward_input.batch.reqs})
        return forward(forward_input)

    llm._forward = record
    start = llm.next_uid
    outs = ([llm.generate([p], params)[0] for p in prompts] if one_by_one
            else llm.generate(prompts, params))
    llm._forward = forward
    return outs, [hits[start + i] for i in range(len(prompts))]


def test_radix_is_registered_and_the_default():
    from minisgl.kvcache import create_prefix_cache
    from minisgl.scheduler import SchedulerConfig

    assert isinstance(create_prefix_cache("radix", 4), RadixPrefixCache)
    assert SchedulerConfig(model_path="x").cache_type == "radix"


@pytest.mark.parametrize("name, page_size", [("smollm2", 1), ("tiny_qwen3", 4)])
def test_shared_prefix_hits_and_greedy_equals_hf(models, name, page_size):
    from minibook.hf import hf_greedy
    from minisgl.core import SamplingParams
    from minisgl.llm import LLM

    path = models[name]
    llm = LLM(path, max_running_req=4, page_size=page_size, num_page_override=256 // page_size,
              max_seq_len_override=64)
    system = list(range(300, 322))  # 22 个 token 的共同前缀
    prompts = [system + [400 + i, 500 + i, 600 + i] for i in range(3)]
    params = SamplingParams(max_tokens=5, ignore_eos=True)
    outs, hits = prefill_hits(llm, prompts, params, one_by_one=True)
    for prompt, out in zip(prompts, outs):
        assert out["token_ids"] == hf_greedy(path, prompt, 5)
    assert hits == [0, 22 - 22 % page_size, 22 - 22 % page_size]
    # 第二轮对话：上一轮的提示 + 回答 + 新问题。回答也进了缓存，命中的比提示还长
    turn2 = prompts[0] + outs[0]["token_ids"] + [700, 701]
    out2, hit2 = prefill_hits(llm, [turn2], params, one_by_one=True)
    assert out2[0]["token_ids"] == hf_greedy(path, turn2, 5)
    ps = page_size
    assert hit2 == [(len(prompts[0]) + 5 - 1) // ps * ps]  # 最后一个生成的 token 没进过 KV 池
    llm.run_when_idle()
    llm.shutdown()


def test_requests_in_the_same_prefill_batch_do_not_share(models):
    """前缀在 prefill 之后才插进树：同一批里的请求彼此看不见，要等下一批。"""
    from minisgl.core import SamplingParams
    from minisgl.llm import LLM

    system = list(range(300, 340))
    prompts = [system + [400 + i] * 4 for i in range(4)]  # 每个 44 个 token
    params = SamplingParams(max_tokens=2, ignore_eos=True)
    llm = LLM(models["tiny_qwen3"], max_running_req=4, num_page_override=512, max_seq_len_override=64)
    assert prefill_hits(llm, prompts, params, one_by_one=False)[1] == [0, 0, 0, 0]
    llm.shutdown()
    # 预算正好是一个提示的长度（44）：第一批只有第一个请求，之后的每个都命中 40 个
    llm = LLM(models["tiny_qwen3"], max_running_req=4, num_page_override=512, max_seq_len_override=64,
              max_extend_tokens=44)
    assert prefill_hits(llm, prompts, params, one_by_one=False)[1] == [0, 40, 40, 40]
    llm.shutdown()


def _small_pool_run(path, page_size: int):
    from minibook.hf import hf_greedy
    from minisgl.core import SamplingParams
    from minisgl.llm import LLM

    llm = LLM(path, max_running_req=2, page_size=page_size, num_page_override=48 // page_size,
              max_seq_len_override=48)
    rng = torch.Generator().manual_seed(page_size)
    params = SamplingParams(max_tokens=4, ignore_eos=True)
    evicted_any = False
    for i in range(8):  # 8 个互不相同的 20 token 提示，一个接一个：池子只放得下两个多
        prompt = torch.randint(100, 2000, (20,), generator=rng).tolist()
        before = llm.cache_manager.prefix_cache.size_info.total_size
        out = llm.generate([prompt], params)[0]
        assert out["token_ids"] == hf_greedy(path, prompt, 4)
        llm.run_when_idle()  # 每次空闲都核对：空闲页 + 缓存页 == 总页数
        evicted_any |= llm.cache_manager.prefix_cache.size_info.total_size <= before
    assert evicted_any
    llm.shutdown()


@pytest.mark.parametrize("page_size", [1, 4])
def test_small_pool_evicts_and_output_still_equals_hf(models, page_size):
    _small_pool_run(models["tiny_qwen3"], page_size)


def _one_page_leaves_then_a_long_prompt(path) -> None:
    """缓存里攒一串一页大的叶子，再来一个要逐出两页的长提示。"""
    from minisgl.core import SamplingParams
    from minisgl.llm import LLM

    llm = LLM(path, max_running_req=2, page_size=4, num_page_override=16, max_seq_len_override=40)
    one = SamplingParams(max_tokens=1, ignore_eos=True)
    system = list(range(300, 316))  # 4 页的共同前缀
    for i in range(6):  # 每个请求只给树添一页叶子：[x x x x]，第 21 个 token 不满一页
        llm.generate([system + [400 + i] * 4 + [9]], one)
    cm = llm.cache_manager
    assert cm.prefix_cache.size_info.total_size == (4 + 6) * 4 and cm.allocator.num_free_pages == 6
    llm.generate([list(range(500, 532))], one)  # 32 个 token 要 8 页：空闲 6 页，差 2 页
    llm.run_when_idle()
    llm.shutdown()


def test_regression_eviction_in_tokens_through_the_cache_manager(models, monkeypatch):
    """上游 #80：CacheManager 缺 2 页，要向缓存要 2 × page_size 个 token；要成 2 个 token，
    缓存只逐出一个一页的叶子，页还是不够。"""
    calls = []
    evict = RadixPrefixCache.evict

    def recording(self, size):
        out = evict(self, size)
        calls.append((size, len(out)))
        return out

    monkeypatch.setattr(RadixPrefixCache, "evict", recording)
    _one_page_leaves_then_a_long_prompt(models["tiny_qwen3"])
    assert calls == [(8, 8)]  # 缺 2 页 = 8 个 token，逐出两个一页的叶子
    monkeypatch.setattr(RadixPrefixCache, "evict", lambda self, size: evict(self, size // 4))
    with pytest.raises((AssertionError, RuntimeError)):  # 页数当 token 数：逐出一页，分配失败
        _one_page_leaves_then_a_long_prompt(models["tiny_qwen3"])
