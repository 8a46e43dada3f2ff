"""第 17 章的测量：decode 注意力一层要多久，torch（先按页表取出 K/V 再 SDPA）对 paged（隔着页表读）。

三个测量（数字取决于机器，只看同一次运行里的对比）：
  layer     一层 decode 注意力（存这一步的 K/V + 注意力），批大小 × 上下文长度的网格，SmolLM2 的形状；
  prefill   一个长提示的 prefill 注意力：paged 算子在这里慢，所以 auto 让 prefill 走 SDPA；
  step      真实引擎（SmolLM2）一步 decode 的时间，torch 对 auto（prefill 用 SDPA、decode 用 paged）。

    python examples/ch17_bench.py                  # 三个都跑
    python examples/ch17_bench.py layer --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time

import torch

from minibook.models import smollm2
from minisgl.attention import create_attention_backend
from minisgl.core import Batch, Req, SamplingParams
from minisgl.kvcache import MHAKVCachePool, PageAllocator
from minisgl.llm import LLM

HQ, HKV, HEAD_DIM = 9, 3, 64  # SmolLM2-135M：9 个 q 头、3 个 KV 头
LAYERS = 30
BATCHES = (1, 8, 32)
CONTEXTS = (128, 1024, 4096)


def make_reqs(batch: int, context: int) -> list[Req]:
    """batch 个请求，每个已有 context - 1 个 token 的 K/V，这一步 decode 第 context 个。"""
    reqs = []
    for i in range(batch):
        req = Req(input_ids=torch.zeros(context, dtype=torch.int32), table_idx=i, cached_len=0, output_len=1,
                  uid=i, sampling_params=SamplingParams(max_tokens=1), cache_handle=None)
        reqs.append(req)
    return reqs


class LayerBench:
    """一个 KV 池 + 页表 + 一批请求，槽位由真实的分配器分：每个请求先 prefill 一段（连续的槽位），
    再一起 decode（新 token 的槽位交错）。"""

    def __init__(self, batch: int, context: int, num_q: int = 1, seed: int = 0) -> None:
        gen = torch.Generator().manual_seed(seed)
        prefill_len = context - num_q
        num_slots = batch * context + 1
        self.pool = MHAKVCachePool(HKV, 1, HEAD_DIM, num_pages=num_slots, page_size=1, dtype=torch.float32,
                                   device="cpu")
        self.pool.kv_buffer.copy_(torch.randn(self.pool.kv_buffer.shape, generator=gen))
        self.page_table = torch.zeros(batch, context, dtype=torch.int32)
        alloc = PageAllocator(num_slots, 1, self.page_table)
        self.reqs = make_reqs(batch, context)
        for req in self.reqs:  # 提示部分：一个请求一段连续的槽位
            req.cached_len, req.device_len = 0, prefill_len
            alloc.alloc_slots([req])
            req.cached_len = prefill_len
        for req in self.reqs:
            req.device_len = context  # 这一步：每个请求 num_q 个新 token
        self.out_loc = alloc.alloc_slots(self.reqs)
        self.q = torch.randn(batch * num_q, HQ, HEAD_DIM, generator=gen)
        self.k = torch.randn(batch * num_q, HKV, HEAD_DIM, generator=gen)
        self.v = torch.randn(batch * num_q, HKV, HEAD_DIM, generator=gen)
        self.phase = "decode" if num_q == 1 else "prefill"

    def time_ms(self, backend_name: str, reps: int) -> float:
        backend = create_attention_backend(backend_name, self.pool, self.page_table)
        batch = Batch(reqs=self.reqs, phase=self.phase)
        batch.padded_reqs, batch.out_loc = self.reqs, self.out_loc
        backend.prepare_metadata(batch)  # 一步只做一次，不算进一层的时间
        backend.forward(self.q, self.k, self.v, 0, batch)  # 热身
        samples = []
        for _ in range(reps):
            start = time.perf_counter()
            backend.forward(self.q, self.k, self.v, 0, batch)
            samples.append(time.perf_counter() - start)
        return statistics.median(samples) * 1e3


def gathered_mib(batch: int, context: int) -> float:
    """torch 后端一层要拷出来的 K 和 V（float32）：MiB。"""
    return batch * context * HKV * HEAD_DIM * 4 * 2 / 2**20


def layer_grid(reps: int = 7) -> list[dict]:
    rows = []
    for batch in BATCHES:
        for context in CONTEXTS:
            bench = LayerBench(batch, context)
            # 两个后端轮流量，各取中位数：机器的负载起伏同样落在两边
            times = {"torch": [], "paged": []}
            for _ in range(3):
                for name in times:
                    times[name].append(bench.time_ms(name, reps))
            rows.append({"batch": batch, "context": context, "torch_ms": statistics.median(times["torch"]),
                         "paged_ms": statistics.median(times["paged"]), "gathered_mib": gathered_mib(batch, context)})
    return rows


def print_layer_grid(rows: list[dict]) -> None:
    print(f"一层 decode 注意力（SmolLM2 的形状：{HQ} 个 q 头、{HKV} 个 KV 头、head_dim {HEAD_DIM}），"
          f"{torch.get_num_threads()} 个线程，中位数 ms")
    print("  批  上下文    torch     paged   torch/paged   torch 每层拷出的 K/V")
    for r in rows:
        print(f"  {r['batch']:>2}  {r['context']:>5}  {r['torch_ms']:8.3f}  {r['paged_ms']:8.3f}"
              f"  {r['torch_ms'] / r['paged_ms']:9.2f}×   {r['gathered_mib']:8.1f} MiB（{LAYERS} 层 "
              f"{r['gathered_mib'] * LAYERS:7.0f} MiB/步）")


def prefill_compare(length: int = 512, reps: int = 3) -> dict[str, float]:
    bench = LayerBench(1, length, num_q=length)
    times = {"torch": [], "paged": []}
    for _ in range(2):
        for name in times:
            times[name].append(bench.time_ms(name, reps))
    return {name: statistics.median(v) for name, v in times.items()}


def decode_step_ms(backend: str, batch: int, context: int, steps: int = 8) -> float:
    """真实引擎：batch 个长 context 的提示一起 decode，不重叠，满批 decode 步的中位数（ms）。"""
    old = os.environ.get("MINISGL_DISABLE_OVERLAP_SCHEDULING")
    os.environ["MINISGL_DISABLE_OVERLAP_SCHEDULING"] = "1"
    try:
        llm = LLM(smollm2(), max_running_req=batch, page_size=16, attention_backend=backend,
                  num_page_override=batch * (context + steps + 16) // 16 + 1, max_seq_len_override=context + steps + 16,
                  max_extend_tokens=max(2048, context))
    finally:
        if old is None:
            os.environ.pop("MINISGL_DISABLE_OVERLAP_SCHEDULING")
        else:
            os.environ["MINISGL_DISABLE_OVERLAP_SCHEDULING"] = old
    times = []
    forward = llm.engine.forward_batch

    def timed(b, args):
        start = time.perf_counter()
        out = forward(b, args)
        if b.is_decode and b.size == batch:
            times.append(time.perf_counter() - start)
        return out

    llm.engine.forward_batch = timed
    prompts = [[(13 * i + 7 * j) % 5000 + 100 for j in range(context)] for i in range(batch)]
    llm.generate(prompts, SamplingParams(max_tokens=steps, ignore_eos=True))
    llm.shutdown()
    return statistics.median(times) * 1e3


@contextlib.contextmanager
def native_stderr_muted():
    """profiler 的 C++ 部分（kineto）每开关一次都往文件描述符 2 直接写一行日志：量的时候把它指到 /dev/null。"""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def step_profile(backend: str, batch: int, context: int) -> dict[str, float]:
    """真实引擎一步满批 decode 的 torch.profiler 记录：总时间，以及按页表取 K/V（index_select）、
    SDPA、paged 算子各占多少（ms，自身时间）。"""
    old = os.environ.get("MINISGL_DISABLE_OVERLAP_SCHEDULING")
    os.environ["MINISGL_DISABLE_OVERLAP_SCHEDULING"] = "1"  # 前向在调度器线程上跑，profiler 看得全
    try:
        llm = LLM(smollm2(), max_running_req=batch, page_size=16, attention_backend=backend,
                  num_page_override=batch * (context + 32) // 16 + 1, max_seq_len_override=context + 32,
                  max_extend_tokens=max(2048, context))
    finally:
        if old is None:
            os.environ.pop("MINISGL_DISABLE_OVERLAP_SCHEDULING")
        else:
            os.environ["MINISGL_DISABLE_OVERLAP_SCHEDULING"] = old
    records = []
    forward = llm.engine.forward_batch

    def profiled(b, args):
        if not (b.is_decode and b.size == batch) or len(records) >= 3:
            return forward(b, args)
        with native_stderr_muted(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            out = forward(b, args)
            total = time.perf_counter() - start
        self_ms = {e.key: e.self_cpu_time_total / 1e3 for e in prof.key_averages()}
        records.append({"total_ms": total * 1e3,
                        "gather_ms": self_ms.get("aten::index_select", 0.0),
                        "sdpa_ms": sum(v for k, v in self_ms.items() if "scaled_dot_product" in k or "flash_attention" in k),
                        "paged_ms": self_ms.get("minisgl::paged_attention", 0.0)})
        return out

    llm.engine.forward_batch = profiled
    prompts = [[(13 * i + 7 * j) % 5000 + 100 for j in range(context)] for i in range(batch)]
    llm.generate(prompts, SamplingParams(max_tokens=5, ignore_eos=True))
    llm.shutdown()
    return {key: statistics.median(r[key] for r in records) for key in records[0]}


def step_compare(batches=(1, 8, 32), context: int = 512) -> list[dict]:
    rows = []
    for batch in batches:
        rows.append({"batch": batch, "context": context, "torch_ms": decode_step_ms("torch", batch, context),
                     "auto_ms": decode_step_ms("auto", batch, context)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="*", choices=["layer", "prefill", "step"], default=[])
    parser.add_argument("--json", help="把 layer 的结果另存为 JSON（画图用）")
    args = parser.parse_args()
    what = args.what or ["layer", "prefill", "step"]
    print(f"（机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}，{os.cpu_count()} 个核）")
    if "layer" in what:
        rows = layer_grid()
        print_layer_grid(rows)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f)
    if "prefill" in what:
        p = prefill_compare()
        print(f"一个 512 个 token 的提示，prefill 注意力一层：torch {p['torch']:.1f} ms，paged {p['paged']:.1f} ms"
              f"（paged 慢 {p['paged'] / p['torch']:.1f} 倍：每个 query 单独扫一遍 key，没有 SDPA 的分块矩阵乘）")
    if "step" in what:
        print("SmolLM2 整个 decode 一步（不重叠），上下文 512，中位数 ms：")
        for r in step_compare():
            print(f"  批 {r['batch']:>2}：torch {r['torch_ms']:7.1f}   auto（torch,paged）{r['auto_ms']:7.1f}"
                  f"   快 {r['torch_ms'] / r['auto_ms']:.2f} 倍")


if __name__ == "__main__":
    main()
