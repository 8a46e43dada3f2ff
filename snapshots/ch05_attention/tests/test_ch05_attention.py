"""第 5 章的测试：SDPA 注意力后端与逐个 query 循环的 float64 朴素注意力逐元素对照。

覆盖变长 prefill、带缓存前缀的 prefill、变长 decode 批次、GQA（每组 1/2/4 个 q 头）、
page_size 1 和 4、混合批次；KV 池先填满 nan，读到任何没写过的槽位都会暴露出来。
"""

from __future__ import annotations

import math
import random

import pytest
import torch
import torch.nn.functional as F

from minisgl.attention import (
    BaseAttnBackend,
    SDPAAttnBackend,
    SDPAAttnMetadata,
    causal_mask_bottom_right,
    create_attention_backend,
)
from minisgl.core import Batch, Req, SamplingParams
from minisgl.distributed import set_tp_info
from minisgl.kvcache import MHAKVCachePool, PageAllocator

ATOL = 1e-5  # float32 的后端对 float64 的参照

HEADS = [(4, 4), (4, 2), (8, 2)]  # (hq, hkv)：每个 KV 头对应 1、2、4 个 q 头


@pytest.fixture(autouse=True)
def single_rank():
    set_tp_info(0, 1)
    yield
    set_tp_info(0, 1)


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    q_positions: list[int]) -> torch.Tensor:
    """最直白的注意力，float64。

    q: [n_q, hq, d]，第 i 个 query 在序列里的位置是 q_positions[i]；k/v: [n_k, hkv, d] 是
    这个请求从位置 0 开始的全部 key。位置 p 的 query 只看位置 0..p 的 key；
    第 h 个 q 头用第 h // (hq / hkv) 个 KV 头。
    """
    q, k, v = q.double(), k.double(), v.double()
    hq, hkv, d = q.shape[1], k.shape[1], q.shape[2]
    group = hq // hkv
    out = torch.zeros_like(q)
    for i, p in enumerate(q_positions):
        for h in range(hq):
            keys, values = k[: p + 1, h // group], v[: p + 1, h // group]
            weights = torch.softmax(keys @ q[i, h] / math.sqrt(d), dim=0)
            out[i, h] = weights @ values
    return out


class World:
    """一个小引擎的"存储部分"：KV 池、页表、分配器、后端，外加每个请求真实的 K/V 历史。"""

    def __init__(self, seed: int, hq: int, hkv: int, page_size: int, head_dim: int = 16,
                 num_layers: int = 2, num_pages: int = 64, rows: int = 8, width: int = 64,
                 dtype: torch.dtype = torch.float32):
        self.gen = torch.Generator().manual_seed(seed)
        self.hq, self.hkv, self.d, self.num_layers = hq, hkv, head_dim, num_layers
        self.dtype = dtype
        self.pool = MHAKVCachePool(hkv, num_layers, head_dim, num_pages, page_size, dtype, "cpu")
        self.pool.kv_buffer.fill_(float("nan"))  # 没写过的槽位一旦被读到，结果就是 nan
        # -1 也是陷阱：负下标会从末尾取，取到的是 nan
        self.page_table = torch.full((rows + 1, width), -1, dtype=torch.int32)
        self.alloc = PageAllocator(num_pages, page_size, self.page_table)
        self.backend = SDPAAttnBackend(self.pool, self.page_table)
        self.history: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}
        self.next_row = 0

    def randn(self, *shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=self.gen).to(self.dtype)

    def _append(self, req: Req, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        old_k, old_v = self.history[(req.uid, layer)]
        self.history[(req.uid, layer)] = (torch.cat([old_k, k]), torch.cat([old_v, v]))

    @staticmethod
    def _req(row: int, prompt_len: int, cached_len: int = 0, output_len: int = 16) -> Req:
        return Req(input_ids=torch.zeros(prompt_len, dtype=torch.int32), table_idx=row,
                   cached_len=cached_len, output_len=output_len, uid=row,
                   sampling_params=SamplingParams(max_tokens=output_len), cache_handle=None)

    def new_req(self, prompt_len: int, cached_len: int = 0, output_len: int = 16) -> Req:
        """新请求；cached_len > 0 时模拟前缀缓存命中：前缀的 K/V 早已在池子里。"""
        row = self.next_row
        self.next_row += 1
        req = self._req(row, prompt_len, cached_len, output_len)
        empty = torch.empty(0, self.hkv, self.d, dtype=self.dtype)
        for layer in range(self.num_layers):
            self.history[(req.uid, layer)] = (empty, empty)
        if cached_len:  # 更早的一次前向在同一行算过这段前缀
            out_loc = self.alloc.alloc_slots([self._req(row, cached_len)])
            for layer in range(self.num_layers):
                k, v = self.randn(cached_len, self.hkv, self.d), self.randn(cached_len, self.hkv,
                                                                             self.d)
                self.pool.store_kv(k, v, out_loc, layer)
                self._append(req, layer, k, v)
        return req

    def make_batch(self, reqs: list[Req], phase: str) -> Batch:
        """调度器的活：给这一步的 token 分配槽位，填好 out_loc，再让后端准备元数据。"""
        batch = Batch(reqs=reqs, phase=phase)
        batch.padded_reqs = reqs
        batch.out_loc = self.alloc.alloc_slots(reqs)
        self.backend.prepare_metadata(batch)
        return batch

    def step(self, reqs: list[Req], phase: str) -> float:
        """一步前向（每层随机的 q/k/v），与朴素注意力对照；返回最大误差，之后每个请求前进一步。"""
        batch = self.last_batch = self.make_batch(reqs, phase)
        total = sum(r.extend_len for r in reqs)
        worst = 0.0
        for layer in range(self.num_layers):
            q = self.randn(total, self.hq, self.d)
            k, v = self.randn(total, self.hkv, self.d), self.randn(total, self.hkv, self.d)
            out = self.backend.forward(q, k, v, layer, batch)
            assert out.shape == (total, self.hq, self.d) and out.dtype == self.dtype
            start = 0
            for r in reqs:  # 参照：每个请求单独算，按输入顺序对照
                n = r.extend_len
                self._append(r, layer, k[start: start + n], v[start: start + n])
                full_k, full_v = self.history[(r.uid, layer)]
                assert len(full_k) == r.device_len
                ref = naive_attention(q[start: start + n], full_k, full_v,
                                      list(range(r.cached_len, r.device_len)))
                worst = max(worst, (out[start: start + n].double() - ref).abs().max().item())
                start += n
        for r in reqs:
            r.complete_one()
        return worst


# ---------------------------------------------------------------- 因果掩码

def test_bottom_right_mask_values():
    assert causal_mask_bottom_right(2, 5).int().tolist() == [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    assert causal_mask_bottom_right(1, 4).all()  # decode：最后一个 token 看得见全部
    for n in (1, 3, 6):  # 没有缓存前缀时就是下三角
        assert torch.equal(causal_mask_bottom_right(n, n), torch.ones(n, n).tril().bool())
    rng = random.Random(0)
    for _ in range(20):
        nk = rng.randint(1, 12)
        nq = rng.randint(1, nk)
        mask = causal_mask_bottom_right(nq, nk)
        for i in range(nq):  # 第 i 个 query 的位置是 nk - nq + i
            assert mask[i].tolist() == [j <= nk - nq + i for j in range(nk)]
    with pytest.raises(AssertionError):  # 内部不变式：query 是序列的最后几个 token
        causal_mask_bottom_right(3, 2)


# ---------------------------------------------------------------- prefill

@pytest.mark.parametrize("hq, hkv", HEADS)
@pytest.mark.parametrize("page_size", [1, 4])
def test_varlen_prefill(hq, hkv, page_size):
    rng = random.Random(hq * 10 + hkv + page_size)
    world = World(seed=page_size, hq=hq, hkv=hkv, page_size=page_size)
    reqs = [world.new_req(rng.randint(1, 13)) for _ in range(4)]
    assert world.step(reqs, "prefill") < ATOL


@pytest.mark.parametrize("hq, hkv", HEADS)
@pytest.mark.parametrize("page_size", [1, 4])
def test_prefill_with_cached_prefix(hq, hkv, page_size):
    rng = random.Random(hq + hkv * 7 + page_size)
    world = World(seed=7 + page_size, hq=hq, hkv=hkv, page_size=page_size)
    reqs = []
    for _ in range(4):
        n = rng.randint(2, 14)
        reqs.append(world.new_req(n, cached_len=rng.randint(1, n - 1)))
    assert any(r.extend_len > 1 for r in reqs)
    assert world.step(reqs, "prefill") < ATOL


# ---------------------------------------------------------------- decode

@pytest.mark.parametrize("hq, hkv", HEADS)
@pytest.mark.parametrize("page_size", [1, 4])
def test_decode_batches_of_different_lengths(hq, hkv, page_size):
    """prefill 之后 decode 若干步；中途有请求结束、有新请求加入，批里的长度一直参差不齐。"""
    rng = random.Random(hq * 3 + hkv + page_size * 11)
    world = World(seed=3 + page_size, hq=hq, hkv=hkv, page_size=page_size)
    running = [world.new_req(n, cached_len=c) for n, c in [(1, 0), (9, 0), (6, 5), (13, 4)]]
    assert world.step(running, "prefill") < ATOL
    for step in range(5):
        batch_lens = {r.device_len for r in running}
        assert len(batch_lens) > 1  # 真的是变长，需要补齐
        assert world.step(running, "decode") < ATOL
        if step == 1:
            running.pop(1)  # 一个请求结束
            newcomer = world.new_req(rng.randint(2, 6))
            assert world.step([newcomer], "prefill") < ATOL
            running.append(newcomer)


def test_decode_uses_one_batched_call_with_key_mask():
    world = World(seed=5, hq=4, hkv=2, page_size=4)
    reqs = [world.new_req(n) for n in (3, 7, 1)]
    world.step(reqs, "prefill")
    batch = world.make_batch(reqs, "decode")
    meta = batch.attn_metadata
    assert isinstance(meta, SDPAAttnMetadata) and meta.single_query
    assert meta.causal_masks == []  # decode 不建因果掩码
    assert meta.seq_lens_q == [1, 1, 1] and meta.seq_lens_k == [4, 8, 2]
    assert meta.kv_indices.shape == meta.key_mask.shape == (3, 8)
    assert meta.key_mask.sum(1).tolist() == [4, 8, 2]
    for i, r in enumerate(reqs):
        n = r.device_len
        assert torch.equal(meta.kv_indices[i, :n], world.page_table[r.table_idx, :n])
        # 补齐的位置重复最后一个真实 key 的槽位（写过的，不会读到 nan）
        assert torch.all(meta.kv_indices[i, n:] == world.page_table[r.table_idx, n - 1])


# ---------------------------------------------------------------- 混合批次

@pytest.mark.parametrize("hq, hkv", HEADS)
@pytest.mark.parametrize("page_size", [1, 4])
def test_mixed_prefill_batch(hq, hkv, page_size):
    """一个 prefill 批次里：没有缓存的、有缓存前缀的、只差最后 1 个 token 的（extend_len = 1）。"""
    world = World(seed=11 + hq, hq=hq, hkv=hkv, page_size=page_size)
    reqs = [world.new_req(5), world.new_req(9, cached_len=6), world.new_req(4, cached_len=3),
            world.new_req(1), world.new_req(12, cached_len=1)]
    assert sorted({r.extend_len for r in reqs}) == [1, 3, 5, 11]
    assert world.step(reqs, "prefill") < ATOL
    assert world.step(reqs, "decode") < ATOL


def test_prefill_batch_where_every_request_has_one_query():
    """全部只差 1 个 token 的 prefill：走和 decode 相同的批量路径，结果一样对。"""
    world = World(seed=2, hq=8, hkv=2, page_size=4)
    reqs = [world.new_req(n, cached_len=n - 1) for n in (2, 9, 5)]
    assert world.step(reqs, "prefill") < ATOL
    assert world.last_batch.attn_metadata.single_query


# ---------------------------------------------------------------- is_causal=True 为什么不行

def test_is_causal_true_is_wrong_with_a_cached_prefix():
    world = World(seed=9, hq=4, hkv=4, page_size=4, num_layers=1)
    req = world.new_req(10, cached_len=6)  # 前 6 个 token 已缓存，这一步算 4 个
    batch = world.make_batch([req], "prefill")
    q, k, v = world.randn(4, 4, 16), world.randn(4, 4, 16), world.randn(4, 4, 16)
    ours = world.backend.forward(q, k, v, 0, batch)
    slots = world.page_table[0, :10]
    keys = world.pool.k_cache(0)[slots].transpose(0, 1)  # [heads, 10, d]
    values = world.pool.v_cache(0)[slots].transpose(0, 1)
    top_left = F.scaled_dot_product_attention(q.transpose(0, 1), keys, values, is_causal=True)
    top_left = top_left.transpose(0, 1)

    world._append(req, 0, k, v)
    ref = naive_attention(q, *world.history[(req.uid, 0)], q_positions=[6, 7, 8, 9])
    assert (ours.double() - ref).abs().max() < ATOL
    # 左上对齐：第 0 个 query 只看见第 0 个 key，而它其实在位置 6，应当看见 0..6
    assert (top_left.double() - ref).abs().max() > 0.1
    # 只有最后一个 query 碰巧对：不会，左上对齐时它也只看见前 4 个 key
    assert (top_left[-1].double() - ref[-1]).abs().max() > 0.01


def test_is_causal_true_is_fine_without_a_prefix():
    """没有缓存前缀时 query 数 = key 数，左上和右下对齐是同一个下三角。"""
    world = World(seed=4, hq=4, hkv=4, page_size=1, num_layers=1)
    req = world.new_req(7)
    batch = world.make_batch([req], "prefill")
    q, k, v = world.randn(7, 4, 16), world.randn(7, 4, 16), world.randn(7, 4, 16)
    ours = world.backend.forward(q, k, v, 0, batch)
    top_left = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1),
                                              v.transpose(0, 1), is_causal=True).transpose(0, 1)
    assert (ours - top_left).abs().max() < ATOL


# ---------------------------------------------------------------- 其他性质

def test_forward_stores_kv_in_its_layer_first():
    world = World(seed=1, hq=4, hkv=2, page_size=4, num_layers=3)
    reqs = [world.new_req(5), world.new_req(3, cached_len=2)]
    batch = world.make_batch(reqs, "prefill")
    q, k, v = world.randn(6, 4, 16), world.randn(6, 2, 16), world.randn(6, 2, 16)
    world.backend.forward(q, k, v, 1, batch)
    assert torch.equal(world.pool.k_cache(1)[batch.out_loc], k)
    assert torch.equal(world.pool.v_cache(1)[batch.out_loc], v)
    for layer in (0, 2):  # 别的层这些槽位还是 nan：没有写错层
        assert world.pool.k_cache(layer)[batch.out_loc].isnan().all()


def test_metadata_for_prefill():
    world = World(seed=6, hq=4, hkv=2, page_size=4)
    reqs = [world.new_req(5), world.new_req(8, cached_len=6), world.new_req(2)]
    batch = world.make_batch(reqs, "prefill")
    meta = batch.attn_metadata
    assert meta.seq_lens_q == [5, 2, 2] and meta.seq_lens_k == [5, 8, 2]
    assert meta.num_tokens == 9 and not meta.single_query
    assert [tuple(m.shape) for m in meta.causal_masks] == [(5, 5), (2, 8), (2, 2)]
    assert torch.equal(meta.causal_masks[1], causal_mask_bottom_right(2, 8))


def test_bfloat16_pool():
    world = World(seed=8, hq=8, hkv=2, page_size=4, dtype=torch.bfloat16)
    reqs = [world.new_req(6), world.new_req(9, cached_len=4)]
    assert world.step(reqs, "prefill") < 2e-2
    assert world.step(reqs, "decode") < 2e-2


def test_wrong_token_count_is_caught():
    world = World(seed=0, hq=4, hkv=2, page_size=1)
    batch = world.make_batch([world.new_req(4)], "prefill")
    with pytest.raises(AssertionError, match="prepare_metadata"):
        world.backend.forward(world.randn(5, 4, 16), world.randn(5, 2, 16),
                              world.randn(5, 2, 16), 0, batch)


def test_create_attention_backend():
    pool = MHAKVCachePool(2, 1, 8, 4, 1, torch.float32, "cpu")
    table = torch.zeros(2, 4, dtype=torch.int32)
    backend = create_attention_backend("torch", pool, table)
    assert isinstance(backend, SDPAAttnBackend) and isinstance(backend, BaseAttnBackend)
    assert backend.kvcache is pool and backend.page_table is table
    with pytest.raises(ValueError, match="torch"):
        create_attention_backend("flashinfer", pool, table)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="没有 CUDA：这条路径只在 GPU 上测")
def test_metadata_on_cuda_matches_cpu():
    """CUDA 上列表经锁页内存、non_blocking 拷过去；结果与 CPU 上逐项相同。"""
    results = []
    for device in ("cpu", "cuda"):
        table = torch.arange(4 * 16, dtype=torch.int32, device=device).view(4, 16)
        pool = MHAKVCachePool(2, 1, 8, 64, 1, torch.float32, device)
        backend = SDPAAttnBackend(pool, table)
        reqs = [World._req(row, n, c) for row, (n, c) in enumerate([(5, 0), (9, 6), (3, 2)])]
        batch = Batch(reqs=reqs, phase="prefill")
        batch.padded_reqs = reqs
        backend.prepare_metadata(batch)
        results.append(batch.attn_metadata)
    cpu, gpu = results
    assert gpu.kv_indices.is_cuda and torch.equal(gpu.kv_indices.cpu(), cpu.kv_indices)
    assert torch.equal(gpu.key_mask.cpu(), cpu.key_mask)
    assert all(torch.equal(g.cpu(), c) for g, c in zip(gpu.causal_masks, cpu.causal_masks))


@pytest.mark.parametrize("hq,hkv,n_q,n_k", [(9, 3, 1, 37), (16, 8, 7, 12), (4, 4, 5, 5), (8, 2, 1, 1)])
def test_sdpa_with_enable_gqa_equals_repeating_the_kv_heads(hq, hkv, n_q, n_k):
    """_sdpa 不复制 K/V（enable_gqa=True），结果与先 repeat_kv_heads 再算逐位相同，q 头与 KV 头的对应也一样。"""
    from minisgl.attention.sdpa import repeat_kv_heads

    g = torch.Generator().manual_seed(hq * 100 + n_k)
    q = torch.randn(3, hq, n_q, 16, generator=g)
    k, v = torch.randn(2, 3, hkv, n_k, 16, generator=g)
    mask = torch.rand(3, 1, n_q, n_k, generator=g) > 0.3
    mask[..., -1] = True  # 每个 query 至少看得见一个 key
    ours = SDPAAttnBackend._sdpa(q, k, v, mask)
    ref = F.scaled_dot_product_attention(q, repeat_kv_heads(k, hq), repeat_kv_heads(v, hq),
                                         attn_mask=mask, scale=16 ** -0.5)
    assert torch.equal(ours, ref)
