"""第 4 章的测试：KV 池的形状与读写、按页分配槽位、页表的行管理。"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
import torch

from minisgl.distributed import set_tp_info
from minisgl.kvcache import (
    BaseKVCachePool,
    MHAKVCachePool,
    OutOfPagesError,
    PageAllocator,
    create_kvcache_pool,
    pages_to_slots,
)
from minisgl.scheduler.table import TableManager


@pytest.fixture(autouse=True)
def single_rank():
    """每个测试都从单卡开始，模拟 TP 的测试改过之后也恢复成单卡。"""
    set_tp_info(0, 1)
    yield
    set_tp_info(0, 1)


def make_pool(rng: random.Random, num_pages: int, page_size: int, dtype=torch.float32,
              kv_heads: int | None = None) -> MHAKVCachePool:
    return MHAKVCachePool(num_kv_heads=kv_heads or rng.choice([1, 2, 3, 4]),
                          num_layers=rng.randint(1, 4), head_dim=rng.choice([4, 8, 16]),
                          num_pages=num_pages, page_size=page_size, dtype=dtype, device="cpu")


def new_table(rows: int, width: int) -> torch.Tensor:
    # 用 -1 填满：一个没被分配过的位置如果被读到，会是个明显错误的槽位
    return torch.full((rows, width), -1, dtype=torch.int32)


# ---------------------------------------------------------------- KV 池

@pytest.mark.parametrize("seed", range(6))
def test_pool_shapes_and_views(seed):
    rng = random.Random(seed)
    page_size, num_pages = rng.choice([1, 4, 16]), rng.randint(1, 6)
    pool = make_pool(rng, num_pages, page_size)
    assert isinstance(pool, BaseKVCachePool)
    L, H, D = pool.num_layers, pool.local_kv_heads, pool.head_dim
    assert pool.kv_buffer.shape == (2, L, num_pages * page_size, H, D)
    assert pool.num_slots == num_pages * page_size
    assert pool.dtype == torch.float32 and pool.device == torch.device("cpu")
    assert pool.nbytes == 2 * L * pool.num_slots * H * D * 4
    for layer in range(L):
        k, v = pool.k_cache(layer), pool.v_cache(layer)
        assert k.shape == v.shape == (pool.num_slots, H, D)
        # 视图而不是拷贝：通过视图写，池子里看得到
        k.fill_(layer + 1.0)
        v.fill_(-layer - 1.0)
        assert torch.all(pool.kv_buffer[0, layer] == layer + 1.0)
        assert torch.all(pool.kv_buffer[1, layer] == -layer - 1.0)


@pytest.mark.parametrize("seed", range(6))
def test_store_kv_writes_only_out_loc_of_that_layer(seed):
    rng = random.Random(seed)
    torch.manual_seed(seed)
    pool = make_pool(rng, rng.randint(2, 5), rng.choice([1, 4, 16]))
    pool.kv_buffer.fill_(0.0)
    layer = rng.randrange(pool.num_layers)
    t = rng.randint(1, pool.num_slots)
    out_loc = torch.tensor(rng.sample(range(pool.num_slots), t), dtype=torch.int32)
    k = torch.randn(t, pool.local_kv_heads, pool.head_dim)
    v = torch.randn(t, pool.local_kv_heads, pool.head_dim)
    pool.store_kv(k, v, out_loc, layer)
    assert torch.equal(pool.k_cache(layer)[out_loc], k)
    assert torch.equal(pool.v_cache(layer)[out_loc], v)
    written = torch.zeros(2, pool.num_layers, pool.num_slots, dtype=torch.bool)
    written[:, layer, out_loc.long()] = True
    untouched = pool.kv_buffer[~written]
    assert torch.all(untouched == 0)  # 别的层、别的槽位一个都没动


def test_store_kv_asserts_shapes():
    """store_kv 是内部调用：形状或 dtype 不对是调用者的 bug，用断言拦住，不写半截。"""
    pool = MHAKVCachePool(2, 2, 8, num_pages=4, page_size=2, dtype=torch.float32, device="cpu")
    pool.kv_buffer.fill_(0.0)
    loc = torch.tensor([0, 1, 2], dtype=torch.int32)
    good = torch.ones(3, 2, 8)
    for k, v, out_loc in [(torch.ones(3, 3, 8), good, loc),  # 头数不对
                          (good, torch.ones(2, 2, 8), loc),  # token 数和 out_loc 对不上
                          (good.double(), good, loc),
                          (good, good, loc[None])]:
        with pytest.raises(AssertionError):
            pool.store_kv(k, v, out_loc, 0)
    assert torch.all(pool.kv_buffer == 0)


@pytest.mark.parametrize(
    "kv_heads, tp_size, local",
    [(8, 1, 8), (8, 2, 4), (8, 4, 2), (8, 8, 1), (8, 16, 1), (3, 3, 1), (3, 1, 3), (4, 2, 2)],
)
def test_local_kv_heads_under_tp(kv_heads, tp_size, local):
    for rank in {0, tp_size - 1}:
        set_tp_info(rank, tp_size)
        pool = MHAKVCachePool(kv_heads, 2, 8, num_pages=3, page_size=4, dtype=torch.bfloat16,
                              device="cpu")
        assert pool.local_kv_heads == local
        assert pool.k_cache(1).shape == (12, local, 8)
        assert pool.nbytes == 2 * 2 * 12 * local * 8 * 2


@pytest.mark.parametrize("kv_heads, tp_size", [(8, 3), (3, 2), (6, 4)])
def test_kv_heads_that_cannot_be_split(kv_heads, tp_size):
    set_tp_info(0, tp_size)
    with pytest.raises(ValueError):
        MHAKVCachePool(kv_heads, 1, 8, num_pages=2, page_size=1, dtype=torch.float32,
                       device="cpu")


def test_create_kvcache_pool_reads_the_config():
    class Config:  # 只需要这三个字段；第 3 章的 ModelConfig 也有它们
        num_kv_heads, num_layers, head_dim = 3, 5, 16

    pool = create_kvcache_pool(Config(), num_pages=7, page_size=4, dtype=torch.float16,
                               device="cpu")
    assert pool.kv_buffer.shape == (2, 5, 28, 3, 16) and pool.dtype == torch.float16
    set_tp_info(1, 3)
    assert create_kvcache_pool(Config(), 7, 4, torch.float16, "cpu").local_kv_heads == 1


# ---------------------------------------------------------------- PageAllocator：一个请求

@dataclass
class Span:
    """alloc_slots 只读请求的这三个字段；测试用它表示任意区间 [cached_len, device_len)。"""

    table_idx: int
    cached_len: int
    device_len: int


def grow(alloc: PageAllocator, row: int, start: int, end: int) -> torch.Tensor:
    return alloc.alloc_slots([Span(row, start, end)])


def test_pages_to_slots_follows_the_page_rule():
    # 页号不相邻、也不按大小排：第 pos 个位置在第 pos // 4 页，页内偏移 pos % 4
    assert pages_to_slots([5, 2], 4) == [20, 21, 22, 23, 8, 9, 10, 11]
    assert pages_to_slots([5, 2], 4, 3, 6) == [23, 8, 9]  # 跨过页边界
    assert pages_to_slots([5, 2], 4, 6, 6) == [] and pages_to_slots([], 4) == []
    assert pages_to_slots([7, 0, 3], 1) == [7, 0, 3]
    with pytest.raises(AssertionError, match="超出"):
        pages_to_slots([5, 2], 4, 0, 9)  # 两页只有 8 个位置


@pytest.mark.parametrize("page_size", [1, 4, 16])
def test_slots_follow_the_page_rule(page_size):
    """逐个位置检查：新页从页首开始，页内槽位连续，每页只用一次。"""
    rng = random.Random(page_size)
    table = new_table(2, 200)
    alloc = PageAllocator(num_pages=160 // page_size + 8, page_size=page_size, page_table=table)
    # 乱序占几页，让发出去的页号不相邻
    scratch = alloc.alloc_pages(5)
    alloc.free_pages(scratch[::2])
    end = 0
    while end < 150:
        start, end = end, end + rng.randint(1, 9)  # prefill、decode、分块都可能是任意长度
        before = alloc.num_free_pages
        out_loc = grow(alloc, 1, start, end)
        assert out_loc.dtype == torch.int32 and len(out_loc) == end - start
        assert torch.equal(table[1, start:end], out_loc)
        assert before - alloc.num_free_pages == alloc.pages_needed(start, end)
    row = table[1, :end].tolist()
    for pos, slot in enumerate(row):
        assert slot % page_size == pos % page_size  # 页内偏移 = pos % page_size
        if pos % page_size != 0:
            assert slot == row[pos - 1] + 1  # 同一页里接着上一个槽位
    pages = [row[p] // page_size for p in range(0, end, page_size)]
    assert len(set(pages)) == len(pages) == -(-end // page_size)
    assert not set(pages) & set(scratch[1::2])  # 别人手里的页不会发出来
    assert torch.all(table[0] == -1) and torch.all(table[1, end:] == -1)  # 别的地方没动


def test_a_batch_is_allocated_in_order():
    table = new_table(4, 16)
    alloc = PageAllocator(num_pages=8, page_size=4, page_table=table)
    grow(alloc, 2, 0, 3)  # 第 2 行先有 3 个 token：0 号页还剩 1 个空位
    batch = [Span(0, 0, 5), Span(2, 3, 6), Span(1, 0, 0), Span(3, 0, 4)]
    out_loc = alloc.alloc_slots(batch)
    # 第 0 行拿 1、2 号页；第 2 行先填 0 号页的空位 3，再拿 3 号页；
    # 空区间什么都不拿；第 3 行拿 4 号页
    assert out_loc.tolist() == [4, 5, 6, 7, 8] + [3, 12, 13] + [] + [16, 17, 18, 19]
    assert table[0, :5].tolist() == [4, 5, 6, 7, 8]
    assert table[2, :6].tolist() == [0, 1, 2, 3, 12, 13]
    assert torch.all(table[1] == -1) and alloc.num_used_pages == 5
    assert alloc.alloc_slots([]).shape == (0,)


@pytest.mark.parametrize("page_size", [1, 4, 16])
def test_alloc_free_round_trip(page_size):
    table = new_table(3, 10 * page_size)
    alloc = PageAllocator(num_pages=10, page_size=page_size, page_table=table)
    length = 9 * page_size + 1  # 正好 10 页，最后一页只用 1 个位置
    grow(alloc, 2, 0, length)
    assert alloc.num_free_pages == 0 and alloc.num_used_pages == 10
    alloc.free_slots(2, length)
    assert alloc.num_free_pages == 10
    # 还回来的页可以再用；所有槽位恰好各用一次
    out = grow(alloc, 0, 0, 10 * page_size)
    assert sorted(out.tolist()) == list(range(10 * page_size))


# ---------------------------------------------------------------- PageAllocator：多个请求

@pytest.mark.parametrize("page_size", [1, 4, 16])
@pytest.mark.parametrize("seed", range(4))
def test_many_requests_never_share_slots(page_size, seed):
    """随机地开始、延长、结束请求，一批几个；任何时刻槽位互不相交，页数守恒，最后一页不漏。"""
    rng = random.Random(seed * 100 + page_size)
    num_pages, rows, width = 24, 6, 40
    table = new_table(rows + 1, width)
    alloc = PageAllocator(num_pages, page_size, table)
    lengths: dict[int, int] = {}  # 行号 -> 已分配的长度

    def check() -> None:
        owner: dict[int, int] = {}
        for row, n in lengths.items():
            for slot in table[row, :n].tolist():
                assert 0 <= slot < num_pages * page_size
                assert owner.setdefault(slot, row) == row, f"槽位 {slot} 被两个请求占用"
        used = sum(-(-n // page_size) for n in lengths.values())
        assert alloc.num_used_pages == used and alloc.num_free_pages == num_pages - used

    for _ in range(150):
        batch = []
        for row in rng.sample(range(rows), rng.randint(1, 3)):
            start = lengths.get(row, 0)
            if row not in lengths:  # 新请求：一次 prefill
                end = start + rng.randint(1, 12)
            else:  # 延长：decode 1 个，或者一段
                end = min(width, start + rng.choice([1, 1, 1, rng.randint(2, 8)]))
            batch.append(Span(row, start, end))
        need = sum(alloc.pages_needed(s.cached_len, s.device_len) for s in batch)
        if need <= alloc.num_free_pages:
            alloc.alloc_slots(batch)
            lengths.update({s.table_idx: s.device_len for s in batch})
        else:
            with pytest.raises(OutOfPagesError):
                alloc.alloc_slots(batch)
        check()
        if lengths and rng.random() < 0.4:  # 结束一个请求
            row = rng.choice(sorted(lengths))
            alloc.free_slots(row, lengths.pop(row))
            check()
    for row in sorted(lengths):
        alloc.free_slots(row, lengths.pop(row))
    check()
    assert alloc.num_free_pages == num_pages


def test_a_batch_that_does_not_fit_changes_nothing():
    """回归：3 页的池子、page_size 4、两个 8 token 的提示一批进来。

    一个一个分的写法在这里报错时，空闲页已经从 3 变成 1；整批分配必须什么都不改。
    """
    table = new_table(3, 16)
    alloc = PageAllocator(num_pages=3, page_size=4, page_table=table)
    with pytest.raises(OutOfPagesError, match="共需要 4 页，只剩 3 页"):
        alloc.alloc_slots([Span(0, 0, 8), Span(1, 0, 8)])
    assert alloc.num_free_pages == 3 and torch.all(table == -1)
    # 什么都没改，所以同一批去掉一个请求就能照常分配，拿到的正是 0、1 号页
    assert alloc.alloc_slots([Span(1, 0, 8)]).tolist() == list(range(8))
    assert alloc.num_free_pages == 1


@pytest.mark.parametrize("page_size", [1, 4, 16])
def test_out_of_pages_changes_nothing(page_size):
    table = new_table(3, 8 * page_size)
    alloc = PageAllocator(num_pages=5, page_size=page_size, page_table=table)
    grow(alloc, 0, 0, 2 * page_size + 1)  # 用掉 3 页，第 3 页只用了 1 个位置
    table_before = table.clone()
    with pytest.raises(OutOfPagesError, match="需要 3 页，只剩 2 页"):
        grow(alloc, 1, 0, 2 * page_size + 1)
    # 第一个请求够分、第二个不够：整批都不分
    with pytest.raises(OutOfPagesError):
        alloc.alloc_slots([Span(0, 2 * page_size + 1, 3 * page_size + 1),
                           Span(1, 0, 2 * page_size)])
    with pytest.raises(OutOfPagesError):
        alloc.alloc_pages(3)
    assert torch.equal(table, table_before) and alloc.num_free_pages == 2
    # 失败之后照常工作：延长请求 0，先填满第 3 页的空位，再用剩下的 2 页
    out = grow(alloc, 0, 2 * page_size + 1, 5 * page_size)
    assert len(out) == 3 * page_size - 1 and alloc.num_free_pages == 0
    assert torch.equal(table[1], table_before[1])


def test_freed_pages_are_reused_first():
    table = new_table(4, 32)
    alloc = PageAllocator(num_pages=8, page_size=4, page_table=table)
    grow(alloc, 0, 0, 5)  # 0、1 号页
    grow(alloc, 1, 0, 9)  # 2、3、4 号页
    alloc.free_slots(1, 9)
    out = grow(alloc, 2, 0, 12)
    assert out.tolist() == list(range(8, 20))  # 2、3、4 号页，按原来的顺序取回


def test_free_slots_does_not_read_the_page_table():
    """释放只看 CPU 上的记录：把页表涂掉之后，还回来的仍是那一行真正用过的页。"""
    table = new_table(3, 32)
    alloc = PageAllocator(num_pages=8, page_size=4, page_table=table)
    grow(alloc, 0, 0, 6)  # 0、1 号页
    grow(alloc, 1, 0, 9)  # 2、3、4 号页
    table.fill_(0)  # 如果释放去读页表，会以为第 1 行用的是 0 号页
    alloc.free_slots(1, 9)
    assert alloc.num_free_pages == 6
    assert grow(alloc, 2, 0, 12).tolist() == list(range(8, 20))  # 回来的是 2、3、4 号页


def test_free_slots_from_a_page_boundary():
    table = new_table(2, 32)
    alloc = PageAllocator(num_pages=8, page_size=4, page_table=table)
    grow(alloc, 0, 0, 14)  # 4 页
    alloc.free_slots(0, 14, start=8)  # 只还后两页，前两页留着
    assert alloc.num_used_pages == 2
    assert grow(alloc, 0, 8, 10).tolist() == [8, 9]  # 这一行接着长，拿回的是刚还的 2 号页
    with pytest.raises(AssertionError):
        alloc.free_slots(0, 10, start=2)  # start 不在页边界上
    alloc.free_slots(0, 10)
    assert alloc.num_free_pages == 8


def test_misuse_is_caught_by_asserts():
    """这些都是调用者（调度器）的 bug：断言拦住，而且什么都没改。"""
    table = new_table(3, 12)
    alloc = PageAllocator(num_pages=6, page_size=2, page_table=table)
    grow(alloc, 0, 0, 5)  # 0、1、2 号页
    alloc.free_slots(0, 5)
    with pytest.raises(AssertionError):
        alloc.free_slots(0, 5)  # 还两次
    pages = alloc.alloc_pages(2)
    with pytest.raises(AssertionError):
        alloc.free_pages(pages + [5])  # 5 号页本来就空闲：整次释放都不生效
    with pytest.raises(AssertionError):
        alloc.free_pages([pages[0], pages[0]])
    assert alloc.num_free_pages == 4
    alloc.free_pages(pages)
    assert alloc.num_free_pages == 6
    grow(alloc, 1, 0, 3)
    before = table.clone()
    for bad in ([Span(1, 0, 2)],  # 第 1 行已经有页了，cached_len 却说从 0 开始：上一个请求没还
                [Span(2, 2, 4)],  # 第 2 行没有页，cached_len 却说前 2 个已经在池里
                [Span(0, 0, 13)],  # 超出页表宽度
                [Span(0, 0, 2), Span(0, 0, 2)]):  # 同一行在一批里出现两次
        with pytest.raises(AssertionError):
            alloc.alloc_slots(bad)
    assert alloc.num_used_pages == 2 and torch.equal(table, before)


def test_never_write_into_a_page_someone_else_holds():
    """请求接着写最后一页的空位之前，先断言这一页只归它自己。"""
    table = new_table(2, 16)
    alloc = PageAllocator(num_pages=4, page_size=4, page_table=table)
    grow(alloc, 0, 0, 6)  # 0 号页满、1 号页用了 2 个位置
    alloc._refs[1] += 1  # 模拟另一方（比如前缀缓存）也持有 1 号页
    with pytest.raises(AssertionError, match="1 号页"):
        grow(alloc, 0, 6, 7)
    assert grow(alloc, 1, 0, 3).tolist() == [8, 9, 10]  # 写进新页不受影响
    alloc._refs[1] -= 1
    assert grow(alloc, 0, 6, 7).tolist() == [6]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="没有 CUDA")
def test_cuda_allocation_does_not_sync():
    """CUDA 上：分配经锁页内存异步拷贝、释放只读 CPU 记录，两者都不让 CPU 等 GPU。"""
    table = torch.full((3, 64), -1, dtype=torch.int32, device="cuda")
    alloc = PageAllocator(num_pages=16, page_size=4, page_table=table)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # 任何同步都会抛错
    try:
        out = alloc.alloc_slots([Span(0, 0, 5), Span(1, 0, 9)])
        out2 = grow(alloc, 0, 5, 6)
        alloc.free_slots(1, 9)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert out.device == table.device and out.tolist() == list(range(5)) + list(range(8, 17))
    assert out2.tolist() == [5] and table[0, :6].tolist() == list(range(6))


# ---------------------------------------------------------------- 池子 + 页表：写进去的能读回来

@pytest.mark.parametrize("page_size", [1, 4, 16])
def test_store_then_gather_through_page_table(page_size):
    """4 个请求一批，分几步写入 K/V，最后按页表取回，必须正好是写进去的序列。"""
    rng = random.Random(page_size)
    torch.manual_seed(page_size)
    num_pages = 72 // page_size + 8  # 4 个请求、每个最多 17 个 token，够用
    pool = make_pool(rng, num_pages=num_pages, page_size=page_size)
    pool.kv_buffer.fill_(float("nan"))  # 读到没写过的槽位会是 nan
    table = new_table(5, 64)
    alloc = PageAllocator(num_pages, page_size, table)
    H, D = pool.local_kv_heads, pool.head_dim
    history = {row: [[] for _ in range(pool.num_layers)] for row in range(4)}
    lengths = {row: 0 for row in range(4)}
    for step in range(8):
        # 先 prefill，再一个个 decode；整批一次分配
        n = [rng.randint(1, 10) if step == 0 else 1 for _ in range(4)]
        batch = [Span(row, lengths[row], lengths[row] + n[row]) for row in range(4)]
        out_loc = alloc.alloc_slots(batch)
        n = sum(s.device_len - s.cached_len for s in batch)
        for layer in range(pool.num_layers):
            k, v = torch.randn(n, H, D), torch.randn(n, H, D)
            pool.store_kv(k, v, out_loc, layer)
            offset = 0
            for s in batch:
                m = s.device_len - s.cached_len
                history[s.table_idx][layer].append((k[offset:offset + m], v[offset:offset + m]))
                offset += m
        lengths.update({s.table_idx: s.device_len for s in batch})
    for row in range(4):
        slots = table[row, : lengths[row]]
        for layer in range(pool.num_layers):
            k = torch.cat([kv[0] for kv in history[row][layer]])
            v = torch.cat([kv[1] for kv in history[row][layer]])
            assert torch.equal(pool.k_cache(layer)[slots], k)
            assert torch.equal(pool.v_cache(layer)[slots], v)


# ---------------------------------------------------------------- TableManager

def test_table_manager_rows_and_token_pool():
    page_table = torch.zeros(5, 16, dtype=torch.int32)
    tm = TableManager(4, page_table)
    assert tm.page_table is page_table and tm.available_size == 4
    assert tm.token_pool.shape == page_table.shape and tm.token_pool.dtype == torch.int32
    assert tm.token_pool.device == page_table.device
    rows = [tm.allocate() for _ in range(4)]
    assert rows == [0, 1, 2, 3] and tm.available_size == 0  # 最后一行（4）留给占位请求
    with pytest.raises(AssertionError):
        tm.allocate()
    tm.free(2)
    assert tm.available_size == 1 and tm.allocate() == 2  # 还回来的行马上再用
    tm.free(1)
    with pytest.raises(AssertionError):
        tm.free(1)  # 还两次
    with pytest.raises(AssertionError):
        tm.free(4)  # 最后一行从来不发给请求
    assert tm.available_size == 1


def test_table_manager_random_rows_are_unique():
    rng = random.Random(0)
    tm = TableManager(7, torch.zeros(8, 4, dtype=torch.int32))
    held: set[int] = set()
    for _ in range(300):
        if held and (rng.random() < 0.5 or tm.available_size == 0):
            row = rng.choice(sorted(held))
            held.remove(row)
            tm.free(row)
        else:
            row = tm.allocate()
            assert row not in held and 0 <= row < 7
            held.add(row)
        assert tm.available_size == 7 - len(held)


def test_table_manager_needs_the_extra_row():
    with pytest.raises(AssertionError):
        TableManager(4, torch.zeros(4, 8, dtype=torch.int32))
