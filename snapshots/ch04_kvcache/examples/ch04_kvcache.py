"""第 4 章：KV 池、页表与 token 池（token pool）。

不跑模型，只走一遍"K/V 存在哪儿"的记账：
一、按 SmolLM2 的真实配置算 KV 池的形状和字节数；
二、三个长度不同的请求领到页表的行和页（page_size = 4），K/V 写进池子再按页表取回；
三、decode 一步：每个请求多一个 token，只有落在页首的那个需要新页；
四、一个请求结束，它的页和行被下一个请求复用；
五、一批请求装不下时报错，而且什么都不改。
"""

from __future__ import annotations

import torch

from minibook.models import qwen3_06b_config, smollm2
from minisgl.core import Req, SamplingParams
from minisgl.distributed import set_tp_info
from minisgl.kvcache import OutOfPagesError, PageAllocator, create_kvcache_pool
from minisgl.models import ModelConfig
from minisgl.scheduler.table import TableManager

PAGE_SIZE = 4


def kib(n: int) -> str:
    return f"{n / 1024:,.1f} KiB" if n < 1024**2 else f"{n / 1024**2:,.1f} MiB"


def section_pool_size() -> None:
    print("一、KV 池有多大")
    config = ModelConfig.from_json(smollm2())
    print(f"  SmolLM2-135M：{config.num_layers} 层，{config.num_kv_heads} 个 KV 头，"
          f"head_dim = {config.head_dim}")
    # 每个 token 每层存 K 和 V 各 num_kv_heads × head_dim 个数
    for dtype in (torch.float32, torch.bfloat16):
        per_token = (2 * config.num_layers * config.num_kv_heads * config.head_dim
                     * dtype.itemsize)
        print(f"    {str(dtype):15s} 每个 token {kib(per_token)}，每页（{PAGE_SIZE} 个 token）"
              f"{kib(per_token * PAGE_SIZE)}，4096 个 token {kib(per_token * 4096)}")
    pool = create_kvcache_pool(config, num_pages=256, page_size=PAGE_SIZE, dtype=torch.float32,
                               device="cpu")
    print(f"  建一个 256 页、float32 的池子：kv_buffer 形状 {tuple(pool.kv_buffer.shape)}，"
          f"共 {kib(pool.nbytes)}")
    print(f"    k_cache(0) 形状 {tuple(pool.k_cache(0).shape)}，"
          f"是池子的视图：{pool.k_cache(0)._base is pool.kv_buffer}")
    assert pool.nbytes == 256 * PAGE_SIZE * 2 * 30 * 3 * 64 * 4

    qwen = ModelConfig.from_json(qwen3_06b_config())
    print(f"  Qwen3-0.6B：{qwen.num_layers} 层，{qwen.num_kv_heads} 个 KV 头，head_dim = "
          f"{qwen.head_dim}；张量并行时每个 rank 只存自己的 KV 头（meta 设备，只算形状）")
    for tp in (1, 2, 16):
        set_tp_info(0, tp)
        shard = create_kvcache_pool(qwen, num_pages=1024, page_size=PAGE_SIZE,
                                    dtype=torch.bfloat16, device="meta")
        print(f"    TP={tp:<2d} 每个 rank 的 k_cache(0) {tuple(shard.k_cache(0).shape)}，"
              f"池子 {kib(shard.nbytes)}")
    set_tp_info(0, 1)
    print()


def show_row(page_table: torch.Tensor, req: Req) -> str:
    """把页表的一行按页分组打印：每组是同一页里的槽位。"""
    slots = page_table[req.table_idx, : req.device_len].tolist()
    groups = [slots[i: i + PAGE_SIZE] for i in range(0, len(slots), PAGE_SIZE)]
    text = " | ".join(" ".join(f"{s:2d}" for s in g) for g in groups)
    pages = "、".join(str(g[0] // PAGE_SIZE) for g in groups)
    return f"行 {req.table_idx}：[{text}]  {pages} 号页"


def make_req(uid: int, length: int, row: int) -> Req:
    ids = torch.arange(100 * (uid + 1), 100 * (uid + 1) + length, dtype=torch.int32)
    return Req(input_ids=ids, table_idx=row, cached_len=0, output_len=4, uid=uid,
               sampling_params=SamplingParams(max_tokens=4), cache_handle=None)


def main() -> None:
    print("第 4 章：KV 池、页表与 token 池\n")
    torch.manual_seed(0)
    section_pool_size()

    print(f"二、三个请求一批进来（page_size = {PAGE_SIZE}，池子只有 8 页 = 32 个槽位）")
    max_running_reqs, max_seq_len = 3, 16
    # 页表多一行，不发给请求；token 池和它同形状
    page_table = torch.full((max_running_reqs + 1, max_seq_len), -1, dtype=torch.int32)
    table = TableManager(max_running_reqs, page_table)
    alloc = PageAllocator(num_pages=8, page_size=PAGE_SIZE, page_table=page_table)
    pool = create_kvcache_pool(ModelConfig.from_json(smollm2()), num_pages=8,
                               page_size=PAGE_SIZE, dtype=torch.float32, device="cpu")
    stored: dict[int, list[torch.Tensor]] = {}  # uid -> 第 0 层写进去的 K，按步

    def step(reqs: list[Req]) -> None:
        """整批分配槽位，把这一步的 token 写进 token 池、K（随机数）写进第 0 层。"""
        out_loc = alloc.alloc_slots(reqs)
        k = torch.randn(len(out_loc), pool.local_kv_heads, pool.head_dim)
        pool.store_kv(k, torch.zeros_like(k), out_loc, layer_id=0)
        offset = 0
        for req in reqs:
            n = req.extend_len
            table.token_pool[req.table_idx, req.cached_len: req.device_len] = \
                req.input_ids[req.cached_len: req.device_len]
            stored.setdefault(req.uid, []).append(k[offset: offset + n])
            print(f"    uid {req.uid}：位置 [{req.cached_len}, {req.device_len}) → "
                  f"out_loc {out_loc[offset: offset + n].tolist()}")
            offset += n

    def check_gather(reqs: list[Req]) -> None:
        """按页表取回第 0 层的 K，必须正好是写进去的那些。"""
        for req in reqs:
            slots = page_table[req.table_idx, : req.device_len]
            assert torch.equal(pool.k_cache(0)[slots], torch.cat(stored[req.uid]))
        print("  按页表取回每个请求的 K，与写进去的完全一致。")

    reqs = []
    for uid, length in enumerate([5, 8, 3]):
        reqs.append(make_req(uid, length, row=table.allocate()))
    print(f"  提示长度 {[len(r.input_ids) for r in reqs]}，领到的行 "
          f"{[r.table_idx for r in reqs]}，需要的新页 "
          f"{[alloc.pages_needed(0, r.device_len) for r in reqs]}")
    step(reqs)
    for req in reqs:
        print("  " + show_row(page_table, req))
    print(f"  token 池第 0 行：{table.token_pool[0, :5].tolist()}（与请求 0 的提示相同）")
    print(f"  空闲页 {alloc.num_free_pages} / 8，空闲行 {table.available_size} / 3")
    check_gather(reqs)
    print()

    print("三、decode 一步：每个请求多 1 个 token")
    for req in reqs:
        req.complete_one()  # 上一步的 token 都进了池子；新采样的 token 这一步才算
        req.append_host(7)
        at_page_start = (req.device_len - 1) % PAGE_SIZE == 0
        print(f"  uid {req.uid} 的新位置 {req.device_len - 1}："
              f"{'页首，要一页新页' if at_page_start else '接在最后一页里'}")
    step(reqs)
    for req in reqs:
        print("  " + show_row(page_table, req))
    print(f"  空闲页 {alloc.num_free_pages} / 8")
    assert alloc.num_free_pages == 2
    check_gather(reqs)
    print()

    print("四、uid 1 结束，它的行和页给新请求")
    done = reqs[1]
    alloc.free_slots(done.table_idx, done.device_len)
    table.free(done.table_idx)
    print(f"  还回 {done.device_len} 个 token 的页和第 {done.table_idx} 行："
          f"空闲页 {alloc.num_free_pages} / 8，空闲行 {table.available_size} / 3")
    new = make_req(3, 10, row=table.allocate())
    step([new])
    print("  " + show_row(page_table, new))
    reused = sorted({s // PAGE_SIZE for s in page_table[new.table_idx, :10].tolist()})
    print(f"  新请求 uid 3 用的正是刚还回来的第 {done.table_idx} 行和 "
          f"{'、'.join(map(str, reused))} 号页")
    check_gather([reqs[0], reqs[2], new])
    print()

    print("五、一批装不下：报错，而且什么都不改")
    batch = [reqs[0], reqs[2]]
    for req, n in zip(batch, (8, 5)):  # 假设它们各自又拿回了 n 个 token，要一起算
        req.input_ids = torch.cat([req.input_ids, torch.full((n,), 7, dtype=torch.int32)])
        req.cached_len, req.device_len = req.device_len, req.device_len + n
    need = [alloc.pages_needed(r.cached_len, r.device_len) for r in batch]
    before = page_table.clone()
    print(f"  uid 0 要 {need[0]} 页、uid 2 要 {need[1]} 页，空闲只有 {alloc.num_free_pages} 页"
          f"（单给 uid 0 是够的）")
    try:
        alloc.alloc_slots(batch)
        raise AssertionError("页不够，应该报错")
    except OutOfPagesError as e:
        print(f"  {e}")
    assert alloc.num_free_pages == 2 and torch.equal(page_table, before)
    print(f"  出错之后空闲页仍是 {alloc.num_free_pages}，页表一个数都没变")


if __name__ == "__main__":
    main()
