"""第 10 章的两个实验：分块大小对 prefill 内存峰值的影响，以及长提示到来时 decode 卡多久。

    python examples/ch10_experiments.py memory   # 一段长提示按不同块大小 prefill，量内存峰值
    python examples/ch10_experiments.py stall    # 4 个请求 decode 时来一段长提示，三种调度下的 token 间隔

两个实验都在 tiny Qwen3 上跑（16 个 q 头，注意力的分数矩阵够大、模型又小，几秒就跑完）。
内存怎么量：torch.profiler 的 profile_memory 记下 torch 在 CPU 上每一次分配和释放（字节数带正负），
按时间顺序累加，最大值就是这段时间里活着的张量比开始时多出的峰值。进程的 RSS 做不到这一点：
glibc 会把释放的内存留着复用，RSS 只涨不跌，看不出哪一步用得最多。
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from typing import Callable

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from minisgl.core import Batch, SamplingParams
from minisgl.llm import LLM


@contextlib.contextmanager
def _quiet_stderr():
    """profiler 每次开始、结束都在 C++ 里往 stderr 打一行日志；这段时间把 stderr 指到 /dev/null。"""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_memory(fn: Callable[[], object]) -> int:
    """运行 fn，返回这段时间里 torch 在 CPU 上分配的内存比开始时多出的峰值（字节）。"""
    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        with _quiet_stderr():
            prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            events = json.load(f)["traceEvents"]
    # 每个 "[memory]" 事件是一次分配（正）或释放（负）；按时间累加，取最大值
    deltas = sorted((e["ts"], e["args"]["Bytes"]) for e in events if e.get("name") == "[memory]")
    live = peak = 0
    for _, nbytes in deltas:
        live += nbytes
        peak = max(peak, live)
    return peak


class RecordingLLM(LLM):
    """记下每一批的阶段和这一步算的 token 数。"""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[tuple[str, int]] = []

    def _prepare_batch(self, batch: Batch):
        self.batches.append((batch.phase, sum(req.extend_len for req in batch.reqs)))
        return super()._prepare_batch(batch)


def sdpa_ops(backend: SDPBackend | None = None) -> list[str]:
    """带布尔掩码调用一次 SDPA（16 个头、64 个 query 和 key），返回 profiler 记到的注意力相关算子。"""
    q = k = v = torch.randn(1, 16, 64, 32)
    mask = torch.ones(64, 64, dtype=torch.bool).tril()
    kernel = sdpa_kernel([backend]) if backend is not None else contextlib.nullcontext()
    with _quiet_stderr(), kernel, profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    keep = ("attention", "softmax", "bmm")
    return sorted({e.key for e in prof.key_averages() if any(w in e.key for w in keep)})


def make_llm(path, prompt_len: int, **fields) -> RecordingLLM:
    """一个刚好放得下 prompt_len + 64 个 token 的小引擎（页大小 16）。"""
    return RecordingLLM(path, max_running_req=8, page_size=16, num_page_override=(prompt_len + 64) // 16 * 2,
               max_seq_len_override=prompt_len + 64, **fields)


def random_prompt(n: int, seed: int = 0) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(100, 40000, (n,), generator=g).tolist()


def prefill_peak(path, prompt_len: int, chunk: int, backend: SDPBackend | None = None) -> int:
    """一段 prompt_len 个 token 的提示，每步最多算 chunk 个，prefill 期间的内存峰值（字节）。

    backend 为 None 时用 SDPA 自己选的实现；给 SDPBackend.MATH 就强制用“先算完整分数矩阵”的那种。
    """
    llm = make_llm(path, prompt_len, max_extend_tokens=chunk)
    one = SamplingParams(max_tokens=1)
    llm.generate([random_prompt(8, seed=1)], one)  # 热身：第一次前向才建的东西不算在峰值里
    kernel = sdpa_kernel([backend]) if backend is not None else contextlib.nullcontext()
    with kernel:
        peak = peak_memory(lambda: llm.generate([random_prompt(prompt_len)], one))
    llm.shutdown()
    return peak


def decode_stall(path, prompt_len: int, chunk: int | None, decode_between_chunks: bool = False,
                 num_decode: int = 4, warm_steps: int = 6, decode_tokens: int = 40) -> dict:
    """num_decode 个短请求 decode 到第 warm_steps 步时，来一段 prompt_len 个 token 的长提示。

    chunk 为 None 表示不分块（预算大于提示）。时间都从长提示到达的那一刻算起（秒）。返回：
    decode_times  每个短请求每个 token 到达的时刻
    ttft          长提示的第一个输出 token 到达的时刻
    steps         长提示到达之后的每一步：(阶段, 这一步算的 token 数, 结束的时刻, 用时)
    """
    budget = prompt_len + 1 if chunk is None else chunk
    llm = make_llm(path, prompt_len, max_extend_tokens=budget,
                   decode_between_chunks=decode_between_chunks)
    llm.generate([random_prompt(8, seed=1)], SamplingParams(max_tokens=2))  # 热身
    params = SamplingParams(max_tokens=decode_tokens, ignore_eos=True)
    for uid in range(num_decode):
        llm.add_req(uid, torch.tensor(random_prompt(16, seed=10 + uid)), params)
    long_uid = num_decode
    times: dict[int, list[float]] = {uid: [] for uid in range(num_decode + 1)}
    steps: list[tuple[str, int, float, float]] = []
    n_steps, arrived = 0, 0.0
    while llm.runnable:
        if n_steps == warm_steps:  # 长提示在这一刻到达
            llm.add_req(long_uid, torch.tensor(random_prompt(prompt_len)),
                        SamplingParams(max_tokens=4, ignore_eos=True))
            arrived = time.perf_counter()
        start = time.perf_counter()
        outputs = llm.step()
        now = time.perf_counter()
        for out in outputs:
            times[out.uid].append(now)
        if n_steps >= warm_steps:
            phase, tokens = llm.batches[-1]
            steps.append((phase, tokens, now - arrived, now - start))
        n_steps += 1
    llm.shutdown()
    return {"decode_times": [[t - arrived for t in times[uid]] for uid in range(num_decode)],
            "ttft": times[long_uid][0] - arrived, "steps": steps}


def inter_token_gaps(token_times: list[float]) -> list[tuple[float, float]]:
    """相邻两个 token 的间隔：[(后一个 token 到达的时刻, 间隔)]。"""
    return [(b, b - a) for a, b in zip(token_times, token_times[1:])]


def main() -> None:
    from minibook.models import tiny_qwen3

    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    path = tiny_qwen3()
    torch.set_num_threads(1)
    if what in ("memory", "all"):
        n = 2048
        print(f"一段 {n} 个 token 的提示，prefill 期间 torch 在 CPU 上的内存峰值（MiB）：")
        print(f"{'块大小':>6}  {'SDPA 默认':>10}  {'SDPA math':>10}  {'一层分数矩阵':>10}")
        for chunk in (64, 256, 1024, 2048):
            flash = prefill_peak(path, n, chunk) / 2**20
            math_ = prefill_peak(path, n, chunk, SDPBackend.MATH) / 2**20
            scores = 16 * chunk * n * 4 / 2**20  # 最后一块：16 个头 × chunk 个 query × n 个 key × 4 字节
            print(f"{chunk:>9}  {flash:>12.1f}  {math_:>10.1f}  {scores:>14.1f}")
    if what in ("stall", "all"):
        n, chunk = 1024, 128
        print(f"4 个请求 decode 时来一段 {n} 个 token 的提示（块大小 {chunk}）：")
        for name, c, between in [("不分块", None, False), ("分块，prefill 优先（上游）", chunk, False),
                                 ("分块，两块之间 decode 一步", chunk, True)]:
            r = decode_stall(path, n, c, between)
            gaps = [g for times in r["decode_times"] for _, g in inter_token_gaps(times)]
            print(f"  {name}：最长 token 间隔 {max(gaps) * 1000:.0f} ms，长提示 TTFT {r['ttft'] * 1000:.0f} ms")


if __name__ == "__main__":
    main()
