"""第 17 章：更快的注意力后端。

一、一步的元数据只算一次（plan），每一层直接用（run）：真实引擎里的一批 prefill（有一个请求命中了
    前缀缓存）和一批 decode，打印页表、paged 后端的元数据，以及 FlashInfer、FA3 要的同一份信息；
二、一层 decode 注意力：torch 后端先按页表把 K/V 拷出来，paged 后端隔着页表直接读；
三、整个模型：torch、paged、auto（prefill 用 SDPA、decode 用 paged）三种后端的贪心结果都与 HF 逐 token 相同。
"""

from __future__ import annotations

import torch

from ch17_bench import LayerBench, gathered_mib
from minibook.hf import encode, hf_greedy
from minibook.models import smollm2, tiny_qwen3
from minisgl.attention.layout import fa3_layout, flashinfer_layout
from minisgl.core import SamplingParams
from minisgl.llm import LLM

PAGE_SIZE = 4


def show(name: str, t: torch.Tensor) -> str:
    return f"{name}={t.tolist()}"


def section_plan() -> None:
    path = tiny_qwen3()
    print(f"一、plan 一次、每层 run：tiny Qwen3，page_size {PAGE_SIZE}，注意力后端 paged")
    llm = LLM(path, max_running_req=3, page_size=PAGE_SIZE, num_page_override=64, max_seq_len_override=48,
              attention_backend="paged")
    backend = llm.engine.attn_backend
    seen: list[tuple[str, list, dict, dict, object, list]] = []
    prepare = backend.prepare_metadata
    forward = backend.forward
    runs: dict[int, int] = {}  # 每份元数据被几层用过（重叠时下一步的 plan 和这一步的层交错，按对象记）

    def recording_prepare(batch):
        prepare(batch)
        reqs = list(batch.padded_reqs)
        table = llm.engine.page_table
        seen.append((batch.phase, [(r.cached_len, r.extend_len, r.device_len) for r in reqs],
                     flashinfer_layout(table, reqs, PAGE_SIZE), fa3_layout(table, reqs, PAGE_SIZE),
                     batch.attn_metadata, [table[r.table_idx, : r.device_len].tolist() for r in reqs]))
        runs[id(batch.attn_metadata)] = 0

    def counting_forward(q, k, v, layer_id, batch):
        runs[id(batch.attn_metadata)] += 1
        return forward(q, k, v, layer_id, batch)

    backend.prepare_metadata, backend.forward = recording_prepare, counting_forward
    shared = encode(path, "Tell me a story about a cat.")
    # 第一个请求先跑完，它的提示进了前缀缓存；后两个请求一起来，其中一个借用这段前缀
    llm.generate([shared], SamplingParams(max_tokens=1, ignore_eos=True))
    seen.clear()
    llm.engine.synchronize()
    runs.clear()
    llm.generate([shared + encode(path, " The end."), encode(path, "Hi!")],
                 SamplingParams(max_tokens=3, ignore_eos=True))
    for phase, lens, fi, fa, meta, slots in seen[:2]:
        print(f"  一批 {phase}：每个请求（缓存的, 这一步的, 共几个 key）= {lens}")
        for i, s in enumerate(slots):
            print(f"    请求 {i} 的页表行（槽位）：{s}")
        print(f"    paged 的元数据：{show('rows', meta.rows)}，{show('qo_indptr', meta.qo_indptr)}，"
              f"{show('seq_lens_k', meta.seq_lens_k)}")
        print(f"    FlashInfer：{show('qo_indptr', fi['qo_indptr'])}，{show('kv_indptr', fi['kv_indptr'])}，"
              f"{show('kv_indices', fi['kv_indices'])}，{show('last_page_len', fi['last_page_len'])}")
        print(f"    FA3：page_table={fa['page_table'].tolist()}，{show('cache_seqlens', fa['cache_seqlens'])}，"
              f"{show('cu_seqlens_q', fa['cu_seqlens_q'])}")
    layers = llm.engine.model_config.num_layers
    llm.engine.synchronize()
    print(f"  这次 generate 共 {len(seen)} 步：每步 plan 1 次，每份元数据被 run 的次数 = {sorted(set(runs.values()))}"
          f"（模型有 {layers} 层）")
    assert len(runs) == len(seen) and set(runs.values()) == {layers}
    assert seen[0][1][0][0] > 0, "第一个请求应当命中前缀缓存"
    llm.shutdown()
    print()


def section_layer() -> None:
    batch, context = 8, 1024
    bench = LayerBench(batch, context)
    times = {name: min(bench.time_ms(name, reps=5) for _ in range(3)) for name in ("torch", "paged")}
    print(f"二、一层 decode 注意力：{batch} 个请求、每个 {context} 个 key（SmolLM2 的形状），"
          f"{torch.get_num_threads()} 个线程")
    print(f"  torch（先拷出 {gathered_mib(batch, context):.0f} MiB 的 K/V，再 SDPA）：{times['torch']:.2f} ms")
    print(f"  paged（隔着页表读池子）：{times['paged']:.2f} ms")
    print("  （时间随机器和负载而变；完整的网格见 examples/ch17_bench.py）")
    print()


def section_model() -> None:
    path = smollm2()
    texts = ["The capital of France is", "def fibonacci(n):", "Once upon a time,", "List three colors:"]
    prompts = [encode(path, t) for t in texts]
    max_tokens = 16
    want = [hf_greedy(path, p, max_tokens) for p in prompts]
    print(f"三、SmolLM2，{len(prompts)} 个请求各生成 {max_tokens} 个 token，和 HF 的贪心结果比")
    for name in ("torch", "paged", "auto"):
        llm = LLM(path, max_running_req=4, page_size=PAGE_SIZE, num_page_override=128, max_seq_len_override=64,
                  attention_backend=name)
        backend = llm.engine.attn_backend
        kind = type(backend).__name__
        if kind == "HybridBackend":
            kind += f"（prefill {type(backend.prefill_backend).__name__}，decode {type(backend.decode_backend).__name__}）"
        outs = llm.generate(prompts, SamplingParams(max_tokens=max_tokens, ignore_eos=True))
        same = sum(o["token_ids"] == w for o, w in zip(outs, want))
        print(f"  {name:<6}{kind}：与 HF 一致 {same}/{len(want)}")
        assert same == len(want)
        llm.shutdown()


def main() -> None:
    section_plan()
    section_layer()
    section_model()


if __name__ == "__main__":
    main()
