"""第 5 章：注意力后端。

一、三个请求一起 prefill，其中一个命中了前缀缓存（它的前 5 个 token 的 K/V 早已在池子里）：
    看元数据、看右下对齐的因果掩码，与逐个 query 循环的朴素注意力对照；
二、接着 decode 两步：每个请求 1 个 query，补齐成一个批次，用 key_mask 遮掉补出来的 key；
三、真模型：tiny Qwen3 用这个后端 prefill 三个长度不同的提示、再 decode 几步，
    贪心结果与 Hugging Face 逐 token 相同。

q/k/v 在一、二里是固定种子的随机数：后端不关心它们从哪来。
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from minibook.hf import encode, hf_greedy
from minibook.models import tiny_qwen3
from minisgl.attention import causal_mask_bottom_right, create_attention_backend
from minisgl.core import Batch, Context, Req, SamplingParams, set_global_ctx
from minisgl.kvcache import MHAKVCachePool, PageAllocator, create_kvcache_pool
from minisgl.models import ModelConfig, create_model, load_weight
from minisgl.scheduler.table import TableManager

HQ, HKV, HEAD_DIM, LAYERS, PAGE_SIZE = 4, 2, 16, 2, 4


def naive_attention(q, k, v, q_positions):
    """朴素注意力（float64）：位置 p 的 query 看位置 0..p 的 key，q 头 h 用 KV 头 h // 组大小。"""
    q, k, v = q.double(), k.double(), v.double()
    group = q.shape[1] // k.shape[1]
    out = torch.zeros_like(q)
    for i, p in enumerate(q_positions):
        for h in range(q.shape[1]):
            w = torch.softmax(k[: p + 1, h // group] @ q[i, h] / math.sqrt(q.shape[2]), dim=0)
            out[i, h] = w @ v[: p + 1, h // group]
    return out


def grid(mask: torch.Tensor, indent: str = "      ") -> str:
    return "\n".join(indent + " ".join(str(int(x)) for x in row) for row in mask)


def make_req(uid: int, prompt: list[int], row: int, cached_len: int = 0, max_tokens: int = 8):
    return Req(input_ids=torch.tensor(prompt, dtype=torch.int32), table_idx=row,
               cached_len=cached_len, output_len=max_tokens, uid=uid,
               sampling_params=SamplingParams(max_tokens=max_tokens), cache_handle=None)


def prepare_batch(reqs: list[Req], phase: str, alloc: PageAllocator, backend) -> Batch:
    """调度器在前向前要做的事：分配这一步的槽位、填好 Batch、准备元数据。"""
    batch = Batch(reqs=reqs, phase=phase)
    batch.padded_reqs = reqs
    batch.out_loc = alloc.alloc_slots(reqs)  # 每个请求 [cached_len, device_len) 的槽位，首尾相接
    batch.positions = torch.cat([torch.arange(r.cached_len, r.device_len) for r in reqs])
    batch.input_ids = torch.cat([r.input_ids[r.cached_len: r.device_len] for r in reqs])
    backend.prepare_metadata(batch)
    return batch


class RandomKV:
    """记下每个请求、每层写进池子的 K/V，给朴素注意力当参照。"""

    def __init__(self) -> None:
        self.gen = torch.Generator().manual_seed(0)
        self.history: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}

    def randn(self, *shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=self.gen)

    def append(self, uid: int, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        old = self.history.get((uid, layer))
        self.history[(uid, layer)] = (k, v) if old is None else (torch.cat([old[0], k]),
                                                                 torch.cat([old[1], v]))


def run_step(batch: Batch, backend, data: RandomKV) -> float:
    """每层一组随机 q/k/v 走一遍后端，返回与朴素注意力的最大误差。"""
    worst = 0.0
    total = sum(r.extend_len for r in batch.reqs)
    for layer in range(LAYERS):
        q, k, v = data.randn(total, HQ, HEAD_DIM), data.randn(total, HKV, HEAD_DIM), \
            data.randn(total, HKV, HEAD_DIM)
        out = backend.forward(q, k, v, layer, batch)
        start = 0
        for r in batch.reqs:
            n = r.extend_len
            data.append(r.uid, layer, k[start: start + n], v[start: start + n])
            ref = naive_attention(q[start: start + n], *data.history[(r.uid, layer)],
                                  list(range(r.cached_len, r.device_len)))
            worst = max(worst, (out[start: start + n].double() - ref).abs().max().item())
            start += n
    return worst


def section_random(data: RandomKV) -> None:
    print(f"一、三个请求一起 prefill（{HQ} 个 q 头、{HKV} 个 KV 头、head_dim {HEAD_DIM}、"
          f"{LAYERS} 层，page_size {PAGE_SIZE}）")
    pool = MHAKVCachePool(HKV, LAYERS, HEAD_DIM, num_pages=16, page_size=PAGE_SIZE,
                          dtype=torch.float32, device="cpu")
    pool.kv_buffer.fill_(float("nan"))  # 没写过的槽位是 nan：要是读到了，结果里就会有 nan
    page_table = torch.zeros(4, 32, dtype=torch.int32)
    alloc = PageAllocator(16, PAGE_SIZE, page_table)
    backend = create_attention_backend("torch", pool, page_table)

    reqs = [make_req(0, list(range(6)), row=0), make_req(1, list(range(9)), row=1, cached_len=5),
            make_req(2, list(range(3)), row=2)]
    # 请求 1 命中了前缀缓存：前 5 个 token 的 K/V 在某次更早的前向里就写进了池子（同一行）
    prefix_loc = alloc.alloc_slots([make_req(1, list(range(5)), row=1)])
    for layer in range(LAYERS):
        k, v = data.randn(5, HKV, HEAD_DIM), data.randn(5, HKV, HEAD_DIM)
        pool.store_kv(k, v, prefix_loc, layer)
        data.append(1, layer, k, v)

    batch = prepare_batch(reqs, "prefill", alloc, backend)
    meta = batch.attn_metadata
    for r in reqs:
        print(f"  uid {r.uid}：缓存 {r.cached_len} 个，这一步 {r.extend_len} 个 query，"
              f"共 {r.device_len} 个 key")
    print(f"  元数据：seq_lens_q={meta.seq_lens_q}，seq_lens_k={meta.seq_lens_k}，"
          f"single_query={meta.single_query}")
    print("  uid 1 的因果掩码（行：这一步的 4 个 query，位置 5..8；列：全部 9 个 key）")
    bottom_right = causal_mask_bottom_right(4, 9)
    top_left = torch.ones(4, 9, dtype=torch.bool).tril()  # is_causal=True 用的就是它
    print("    右下对齐（正确）：")
    print(grid(bottom_right))
    print("    左上对齐（is_causal=True，错误：位置 5 的 query 只看见了 key 0）：")
    print(grid(top_left))

    error = run_step(batch, backend, data)
    print(f"  后端输出与朴素注意力的最大误差 < 1e-5：{error < 1e-5}")
    assert error < 1e-5

    # 同一个请求换成 is_causal=True，看看错多少
    slots = page_table[1, :9]
    q1 = data.randn(4, HQ, HEAD_DIM)
    keys = pool.k_cache(LAYERS - 1)[slots].transpose(0, 1).repeat_interleave(HQ // HKV, dim=0)
    values = pool.v_cache(LAYERS - 1)[slots].transpose(0, 1).repeat_interleave(HQ // HKV, dim=0)
    wrong = F.scaled_dot_product_attention(q1.transpose(0, 1), keys, values, is_causal=True)
    ref = naive_attention(q1, *data.history[(1, LAYERS - 1)], [5, 6, 7, 8])
    wrong_error = (wrong.transpose(0, 1).double() - ref).abs().max().item()
    print(f"  若对 uid 1 用 is_causal=True：最大误差 {wrong_error:.2f}")
    assert wrong_error > 0.1
    for r in reqs:
        r.complete_one()
    print()

    print("二、decode 两步：每个请求 1 个 query，补齐成一个批次")
    for step in (1, 2):
        batch = prepare_batch(reqs, "decode", alloc, backend)
        meta = batch.attn_metadata
        print(f"  第 {step} 步：key 数 {meta.seq_lens_k}，一次 SDPA 算完"
              f"（single_query={meta.single_query}，因果掩码 {len(meta.causal_masks)} 个）；"
              "key_mask（1 = 真实的 key，0 = 补齐）：")
        print(grid(meta.key_mask))
        error = run_step(batch, backend, data)
        print(f"    与朴素注意力的最大误差 < 1e-5：{error < 1e-5}")
        assert error < 1e-5 and meta.single_query and not meta.causal_masks
        for r in reqs:
            r.complete_one()
    print("  补齐的 key 读的是同一请求最后一个 key 的槽位（写过的），KV 池里的 NaN 从没被读到。")
    print()


def section_real_model() -> None:
    print("三、真模型：tiny Qwen3 用这个后端生成，对照 Hugging Face")
    path = tiny_qwen3()
    config = ModelConfig.from_json(path)
    with torch.device("meta"):  # 先在 meta 上建出形状，再换上真实权重
        model = create_model(config)
    model.load_state_dict(dict(load_weight(path, config)))

    max_running_reqs, max_seq_len, num_new = 3, 64, 6
    page_table = torch.zeros(max_running_reqs + 1, max_seq_len, dtype=torch.int32)
    table = TableManager(max_running_reqs, page_table)
    pool = create_kvcache_pool(config, num_pages=48, page_size=PAGE_SIZE, dtype=torch.float32,
                               device="cpu")
    alloc = PageAllocator(48, PAGE_SIZE, page_table)
    backend = create_attention_backend("torch", pool, page_table)
    ctx = Context(page_size=PAGE_SIZE)
    ctx.attn_backend = backend  # 每个 AttentionLayer 从全局上下文找到它
    set_global_ctx(ctx)

    texts = ["The capital of France is", "Hello", "1, 2, 3, 4, 5, 6, 7, 8,"]
    prompts = [encode(path, t) for t in texts]
    reqs = [make_req(uid, p, row=table.allocate(), max_tokens=num_new)
            for uid, p in enumerate(prompts)]
    phase = "prefill"
    while reqs[0].can_decode:
        batch = prepare_batch(reqs, phase, alloc, backend)
        with ctx.forward_batch(batch):
            logits = model.forward()  # 模型从 ctx.batch 读 input_ids 和 positions
        for r, token in zip(reqs, logits.argmax(dim=-1)):
            r.complete_one()
            r.append_host(token)
        phase = "decode"
    set_global_ctx(None)

    all_same = True
    for r, prompt in zip(reqs, prompts):
        ours = r.input_ids[len(prompt):].tolist()
        ref = hf_greedy(path, prompt, num_new)
        all_same &= ours == ref
        verdict = "与 HF 一致" if ours == ref else f"与 HF 不一致，HF 是 {ref}"
        print(f"  uid {r.uid}（提示 {len(prompt):2d} 个 token）：{ours}  {verdict}")
    print(f"  1 次 prefill + {num_new - 1} 次 decode，每次三个请求一起算；全部一致：{all_same}")
    assert all_same


def main() -> None:
    print("第 5 章：注意力后端\n")
    section_random(RandomKV())
    section_real_model()


if __name__ == "__main__":
    main()
