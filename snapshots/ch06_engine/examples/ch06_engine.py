"""第 6 章的 main：用 Engine 把几个长短不一的提示放进同一批，先 prefill、再逐步 decode。

调度器要到第 7 章才写，这里的 prepare_batch / generate 就是一个手写的"迷你调度器"：
给请求分配页表的行和 KV 槽位，把这一步要算的 token 拼成一批，交给 Engine，再把结果记回请求。
最后和 Hugging Face 逐 token 对答案，两个模型都对。

    python examples/ch06_engine.py                     # 默认：SmolLM2 与 tiny Qwen3
    MINISGL_MODEL=/path/to/Qwen3-0.6B python examples/ch06_engine.py   # 换成你手里的真权重
"""

from __future__ import annotations

import torch

from minisgl.core import Batch, Req, SamplingParams
from minisgl.engine import Engine, EngineConfig
from minisgl.scheduler.table import TableManager


def prepare_batch(engine: Engine, table: TableManager, reqs: list[Req], phase: str) -> Batch:
    """把这一步要算的 token 拼成一批：input_ids、positions、out_loc，再准备注意力元数据。"""
    batch = Batch(reqs, phase)  # type: ignore[arg-type]
    ids, positions, out_locs = [], [], []
    for req in reqs:
        row, start, end = req.table_idx, req.cached_len, req.device_len
        # 这一步的 token 在 KV 池里要有落脚处：按页分配槽位，同时写进页表
        out_locs.append(engine.page_allocator.alloc_slots(engine.page_table, row, start, end))
        ids.append(table.token_pool[row, start:end])
        positions.append(torch.arange(start, end, dtype=torch.int64, device=engine.device))
    batch.input_ids = torch.cat(ids).long()
    batch.positions = torch.cat(positions)
    batch.out_loc = torch.cat(out_locs)
    batch.padded_reqs = reqs
    engine.attn_backend.prepare_metadata(batch)
    return batch


def generate(
    engine: Engine, prompts: list[list[int]], params: list[SamplingParams]
) -> tuple[list[list[int]], list[int]]:
    """所有提示一起 prefill，之后每步把还没结束的请求拼成一批 decode。

    返回每个请求生成的 token，以及每一步的批大小（看得出请求陆续结束、批在变小）。
    为了和 HF 逐 token 比较，这里不在 EOS 处停，只按 max_tokens 结束。
    """
    table = TableManager(engine.config.max_running_req, engine.page_table)
    reqs = []
    for uid, (prompt, sp) in enumerate(zip(prompts, params)):
        row = table.allocate()
        table.token_pool[row, : len(prompt)] = torch.tensor(prompt, dtype=torch.int32)
        reqs.append(Req(input_ids=torch.tensor(prompt, dtype=torch.int32), table_idx=row,
                        cached_len=0, output_len=sp.max_tokens, uid=uid,
                        sampling_params=sp, cache_handle=None))
    outputs: list[list[int]] = [[] for _ in reqs]
    batch_sizes: list[int] = []
    running, phase = reqs, "prefill"
    while running:
        batch = prepare_batch(engine, table, running, phase)
        out = engine.forward_batch(batch, engine.sampler.prepare(batch))
        if out.copy_done is not None:  # GPU 上拷回 CPU 是异步的：等它完成再读 CPU 副本
            out.copy_done.synchronize()
        batch_sizes.append(len(running))
        for req, token in zip(running, out.next_tokens_cpu.tolist()):
            table.token_pool[req.table_idx, req.device_len] = token  # 下一步从这里取输入
            req.complete_one()
            req.append_host(token)
            outputs[req.uid].append(token)
        for req in running:
            if not req.can_decode:  # 生成满了：还回 KV 槽位和页表的行
                # 最后采样出的那个 token 没进过模型，占了槽位的只有 [0, cached_len)
                engine.page_allocator.free_slots(engine.page_table, req.table_idx, req.cached_len)
                table.free(req.table_idx)
        running, phase = [req for req in running if req.can_decode], "decode"
    return outputs, batch_sizes


def main() -> None:
    from minibook.hf import decode, encode, hf_greedy
    from minibook.models import default_model, tiny_qwen3

    texts = ["The capital of France is", "Once upon a time,",
             "def fibonacci(n):", "Water boils at a temperature of"]
    max_tokens = [12, 6, 10, 3]  # 长短不一：请求会陆续结束
    for path in [default_model(), tiny_qwen3()]:
        engine = Engine(EngineConfig(model_path=path, max_running_req=8,
                                     num_page_override=64, page_size=4, max_seq_len_override=64))
        prompts = [encode(path, t) for t in texts]
        params = [SamplingParams(max_tokens=n) for n in max_tokens]
        outputs, sizes = generate(engine, prompts, params)
        print(f"== {path.name}：{len(prompts)} 个请求，KV 池 {engine.num_pages} 页 × 4 token")
        print(f"每一步的批大小：{sizes}")
        for prompt, text, out, n in zip(prompts, texts, outputs, max_tokens):
            same = out == hf_greedy(path, prompt, n)
            assert same, f"{path.name} 上 {text!r} 的输出和 HF 不一致"
            print(f"  {text!r} → {decode(path, out)!r}  与 HF 一致：{same}")
        assert engine.page_allocator.num_free_pages == engine.num_pages  # 全部还回来了
        print(f"结束后空闲页：{engine.page_allocator.num_free_pages} / {engine.num_pages}")
        engine.shutdown()

    # 随机采样：同一个种子、同样的输入，结果完全一样；换一个种子就不同
    path = default_model()
    sampled = []
    for seed in (0, 0, 1):
        engine = Engine(EngineConfig(model_path=path, max_running_req=8, num_page_override=64,
                                     page_size=4, max_seq_len_override=64, seed=seed))
        params = [SamplingParams(temperature=0.8, top_k=50, top_p=0.9, max_tokens=12),
                  SamplingParams(max_tokens=12)]  # 同一批里混一个贪心请求
        outputs, _ = generate(engine, [encode(path, texts[1])] * 2, params)
        sampled.append(outputs)
        engine.shutdown()
    assert sampled[0] == sampled[1] and sampled[0][0] != sampled[2][0]
    assert sampled[0][1] == sampled[2][1] == hf_greedy(path, encode(path, texts[1]), 12)
    print("采样：种子相同 → 结果相同；种子不同 → 采样的请求结果不同；同批的贪心请求始终与 HF 一致")


if __name__ == "__main__":
    main()
