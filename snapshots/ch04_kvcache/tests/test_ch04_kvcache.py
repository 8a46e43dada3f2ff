"""第 4 章的测试：KV 池的形状与读写、按页分配槽位、页表的行管理。"""

from __future__ import annotations

import random

import pytest
import torch

from minisgl.distributed import set_tp_info
from minisgl.kvcache import (
    BaseKVCachePool,
    MHAKVCachePool,
    OutOfPagesError,
    PageAllocator,
    create_kvcache_pool,
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
    with pytest.raises(IndexError, match="层"):
        pool.k_cache(L)


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


def test_store_kv_rejects_bad_input():
    pool = MHAKVCachePool(2, 2, 8, num_pages=4, page_size=2, dtype=torch.float32, device="cpu")
    loc = torch.tensor([0, 1, 2], dtype=torch.int32)
    good = torch.zeros(3, 2, 8)
    with pytest.raises(ValueError, match="形状"):
        pool.store_kv(torch.zeros(3, 3, 8), good, loc, 0)  # 头数不对
    with pytest.raises(ValueError, match="形状"):
        pool.store_kv(good, torch.zeros(2, 2, 8), loc, 0)  # token 数和 out_loc 对不上
    with pytest.raises(ValueError, match="float64"):
        pool.store_kv(good.double(), good, loc, 0)
    with pytest.raises(ValueError, match="一维"):
        pool.store_kv(good, good, loc[None], 0)
    with pytest.raises(IndexError, match="层"):
        pool.store_kv(good, good, loc, 2)
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="page_size"):
            MHAKVCachePool(2, 2, 8, num_pages=4, page_size=bad, dtype=torch.float32, device="cpu")


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

@pytest.mark.parametrize("page_size", [1, 4, 16])
def test_slots_follow_the_page_rule(page_size):
    """按 SPEC 的规则逐个位置检查：新页从页首开始，页内槽位连续。"""
    rng = random.Random(page_size)
    alloc = PageAllocator(num_pages=160 // page_size + 8, page_size=page_size, device="cpu")
    table = new_table(2, 200)
    # 乱序占几页，让发出去的页号不相邻
    scratch = alloc.alloc_pages(5)
    alloc.free_pages(scratch[::2])
    end = 0
    while end < 150:
        start, end = end, end + rng.randint(1, 9)  # prefill、decode、分块都可能是任意长度
        before = alloc.num_free_pages
        out_loc = alloc.alloc_slots(table, 1, start, end)
        assert out_loc.dtype == torch.int32 and len(out_loc) == end - start
        assert torch.equal(table[1, start:end], out_loc)
        assert before - alloc.num_free_pages == alloc.pages_needed(start, end)
    row = table[1, :end].tolist()
    for pos, slot in enumerate(row):
        assert slot % page_size == pos % page_size  # 页内偏移 = pos % page_size
        if pos % page_size != 0:
            assert slot == row[pos - 1] + 1  # 同一页里接着上一个槽位
    pages = [row[p] // page_size for p in range(0, end, page_size)]
    assert len(set(pages)) == len(pages) == -(-end // page_size)  # 每页只用一次
    assert torch.all(table[0] == -1) and torch.all(table[1, end:] == -1)  # 别的地方没动


@pytest.mark.parametrize("page_size", [1, 4, 16])
def test_alloc_free_round_trip(page_size):
    alloc = PageAllocator(num_pages=10, page_size=page_size, device="cpu")
    table = new_table(3, 10 * page_size)
    length = 9 * page_size + 1  # 正好 10 页，最后一页只用 1 个位置
    alloc.alloc_slots(table, 2, 0, length)
    assert alloc.num_free_pages == 0 and alloc.num_used_pages == 10
    alloc.free_slots(table, 2, length)
    assert alloc.num_free_pages == 10
    # 还回来的页可以再用；所有槽位恰好各用一次
    out = alloc.alloc_slots(table, 0, 0, 10 * page_size)
    assert sorted(out.tolist()) == list(range(10 * page_size))


# ---------------------------------------------------------------- PageAllocator：多个请求

@pytest.mark.parametrize("page_size", [1, 4, 16])
@pytest.mark.parametrize("seed", range(4))
def test_many_requests_never_share_slots(page_size, seed):
    """随机地开始、延长、结束一批请求；任何时刻各请求的槽位互不相交，页数记账守恒。"""
    rng = random.Random(seed * 100 + page_size)
    num_pages, rows, width = 24, 6, 40
    alloc = PageAllocator(num_pages, page_size, "cpu")
    table = new_table(rows + 1, width)
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
        action = rng.random()
        if action < 0.3 and len(lengths) < rows:  # 新请求：一次 prefill
            row = next(r for r in range(rows) if r not in lengths)
            n = rng.randint(1, 12)
            if alloc.pages_needed(0, n) <= alloc.num_free_pages:
                alloc.alloc_slots(table, row, 0, n)
                lengths[row] = n
        elif action < 0.8 and lengths:  # 延长一个请求：decode 1 个或者一段
            row = rng.choice(sorted(lengths))
            start = lengths[row]
            end = min(width, start + rng.choice([1, 1, 1, rng.randint(2, 8)]))
            if alloc.pages_needed(start, end) <= alloc.num_free_pages:
                alloc.alloc_slots(table, row, start, end)
                lengths[row] = end
        elif lengths:  # 结束一个请求
            row = rng.choice(sorted(lengths))
            alloc.free_slots(table, row, lengths.pop(row))
        check()
    for row in sorted(lengths):
        alloc.free_slots(table, row, lengths.pop(row))
    check()
    assert alloc.num_free_pages == num_pages


@pytest.mark.parametrize("page_size", [1, 4, 16])
def test_out_of_pages_changes_nothing(page_size):
    alloc = PageAllocator(num_pages=5, page_size=page_size, device="cpu")
    table = new_table(3, 8 * page_size)
    alloc.alloc_slots(table, 0, 0, 2 * page_size + 1)  # 用掉 3 页，第 3 页只用了 1 个位置
    table_before = table.clone()
    free_before = alloc.num_free_pages
    with pytest.raises(OutOfPagesError, match="需要 3 页，只剩 2 页") as info:
        alloc.alloc_slots(table, 1, 0, 2 * page_size + 1)
    assert "每页" in str(info.value)
    assert torch.equal(table, table_before) and alloc.num_free_pages == free_before
    with pytest.raises(OutOfPagesError):
        alloc.alloc_pages(3)
    assert alloc.num_free_pages == free_before
    # 失败之后照常工作：延长请求 0，先填满第 3 页的空位，再用剩下的 2 页
    out = alloc.alloc_slots(table, 0, 2 * page_size + 1, 5 * page_size)
    assert len(out) == 3 * page_size - 1 and alloc.num_free_pages == 0
    assert torch.equal(table[1], table_before[1])


def test_freed_pages_are_reused_first():
    alloc = PageAllocator(num_pages=8, page_size=4, device="cpu")
    table = new_table(4, 32)
    alloc.alloc_slots(table, 0, 0, 5)  # 页 0、1
    alloc.alloc_slots(table, 1, 0, 9)  # 页 2、3、4
    alloc.free_slots(table, 1, 9)
    out = alloc.alloc_slots(table, 2, 0, 12)
    assert sorted({s // 4 for s in out.tolist()}) == [2, 3, 4]
    assert out.tolist() == list(range(8, 20))  # 按原来的顺序取回


def test_free_slots_from_a_page_boundary():
    alloc = PageAllocator(num_pages=8, page_size=4, device="cpu")
    table = new_table(2, 32)
    alloc.alloc_slots(table, 0, 0, 14)  # 4 页
    alloc.free_slots(table, 0, 14, start=8)  # 只还后两页，前两页（例如进了前缀缓存）留着
    assert alloc.num_used_pages == 2
    with pytest.raises(ValueError, match="整数倍"):
        alloc.free_slots(table, 0, 8, start=2)
    alloc.free_slots(table, 0, 8)
    assert alloc.num_free_pages == 8


def test_double_free_and_bad_arguments():
    alloc = PageAllocator(num_pages=6, page_size=2, device="cpu")
    table = new_table(3, 12)
    alloc.alloc_slots(table, 0, 0, 5)  # 页 0、1、2
    alloc.free_slots(table, 0, 5)
    with pytest.raises(ValueError, match="重复释放"):
        alloc.free_slots(table, 0, 5)
    assert alloc.num_free_pages == 6
    pages = alloc.alloc_pages(2)
    with pytest.raises(ValueError, match="重复释放"):
        alloc.free_pages(pages + [5])  # 页 5 空闲：整次释放都不生效
    assert alloc.num_free_pages == 4
    with pytest.raises(ValueError, match="不止一次"):
        alloc.free_pages([pages[0], pages[0]])
    with pytest.raises(ValueError, match="超出范围"):
        alloc.free_pages([6])
    assert alloc.num_free_pages == 4
    alloc.free_pages(pages)
    assert alloc.num_free_pages == 6

    with pytest.raises(IndexError, match="行号"):
        alloc.alloc_slots(table, 3, 0, 1)
    with pytest.raises(ValueError, match="宽度"):
        alloc.alloc_slots(table, 0, 0, 13)
    with pytest.raises(ValueError, match="start"):
        alloc.alloc_slots(table, 0, 4, 3)
    with pytest.raises(ValueError, match="int32"):
        alloc.alloc_slots(table.long(), 0, 0, 1)
    with pytest.raises(ValueError, match="负数"):
        alloc.alloc_pages(-1)
    assert alloc.num_free_pages == 6  # 上面这些都没有改动任何东西
    assert alloc.alloc_slots(table, 0, 3, 3).numel() == 0  # 空区间：什么都不分配
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match="num_pages"):
            PageAllocator(bad, 2, "cpu")


# ---------------------------------------------------------------- 池子 + 页表：写进去的能读回来

@pytest.mark.parametrize("page_size", [1, 4, 16])
def test_store_then_gather_through_page_table(page_size):
    """每个请求分几步写入 K/V，最后按页表取回，必须正好是写进去的序列。"""
    rng = random.Random(page_size)
    torch.manual_seed(page_size)
    num_pages = 72 // page_size + 8  # 4 个请求、每个最多 17 个 token，够用
    pool = make_pool(rng, num_pages=num_pages, page_size=page_size)
    pool.kv_buffer.fill_(float("nan"))  # 读到没写过的槽位会是 nan
    alloc = PageAllocator(num_pages, page_size, "cpu")
    table = new_table(5, 64)
    H, D = pool.local_kv_heads, pool.head_dim
    history = {row: [[] for _ in range(pool.num_layers)] for row in range(4)}
    lengths = {row: 0 for row in range(4)}
    for step in range(8):
        for row in range(4):
            n = rng.randint(1, 10) if step == 0 else 1  # 先 prefill，再一个个 decode
            out_loc = alloc.alloc_slots(table, row, lengths[row], lengths[row] + n)
            lengths[row] += n
            for layer in range(pool.num_layers):
                k, v = torch.randn(n, H, D), torch.randn(n, H, D)
                pool.store_kv(k, v, out_loc, layer)
                history[row][layer].append((k, v))
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
    with pytest.raises(RuntimeError, match="没有空行"):
        tm.allocate()
    tm.free(2)
    assert tm.available_size == 1 and tm.allocate() == 2  # 还回来的行马上再用
    tm.free(1)
    with pytest.raises(ValueError, match="重复释放"):
        tm.free(1)
    with pytest.raises(ValueError, match="超出范围"):
        tm.free(4)
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


def test_table_manager_rejects_bad_tables():
    with pytest.raises(ValueError, match="max_running_reqs \\+ 1"):
        TableManager(4, torch.zeros(4, 8, dtype=torch.int32))
    with pytest.raises(ValueError, match="int32"):
        TableManager(4, torch.zeros(5, 8, dtype=torch.int64))
    with pytest.raises(ValueError, match="max_running_reqs"):
        TableManager(0, torch.zeros(5, 8, dtype=torch.int32))
