"""第 21 章的 main：两种压测各跑一小份。

1. 离线：8 个随机请求一次交给 LLM.generate，量吞吐；
2. 在线：起一个真的服务器，8 个请求按泊松过程（每秒 4 个）到达，流式接收，
   逐个请求打印发出时刻、TTFT、TPOT，最后是 P50 / P99 和吞吐。

时间随机器和负载变；不变的是 token 的个数：每个请求都 ignore_eos，正好生成 max_tokens 个。
"""

from __future__ import annotations

import os

import torch

from minibook.models import smollm2
from minisgl.benchmark import launch_server, poisson_arrivals, random_workload, run_offline, run_online, summarize
from minisgl.llm import LLM
from minisgl.utils.hf import load_tokenizer

SPEC = dict(input_len=(16, 64), output_len=(8, 32), vocab_size=10000)
RATE = 4.0  # 每秒平均到达几个请求


def offline_demo() -> None:
    work = random_workload(8, seed=0, **SPEC)
    llm = LLM(str(smollm2()), max_running_req=8)
    try:
        result = run_offline(llm, work)
    finally:
        llm.shutdown()
    print(f"离线：{result.requests} 个请求，提示共 {result.input_tokens} 个 token，生成 {result.output_tokens} 个")
    print(f"  用时 {result.seconds:.2f} s，输出吞吐 {result.output_throughput:.1f} token/s，"
          f"连提示一起 {result.total_throughput:.1f} token/s")


def online_demo(rate: float = RATE):
    """在线压测一小份，返回 (请求, 结果)：notebook 用它画时间线。"""
    tok = load_tokenizer(smollm2())
    requests = [(tok.decode(r.prompt_ids), r.max_tokens) for r in random_workload(8, seed=1, **SPEC)]
    with launch_server("--model-path", str(smollm2()), "--max-running-requests", "8",
                       env={"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}) as url:
        result = run_online(url, requests, rate, seed=0)
    return requests, result


def main() -> None:
    torch.set_num_threads(2)
    offline_demo()
    requests, result = online_demo()
    arrivals = poisson_arrivals(len(requests), RATE, seed=0)
    print(f"\n在线：{len(requests)} 个请求，平均每秒到达 {RATE:g} 个（泊松过程），流式接收")
    for i, (trace, (_, max_tokens), at) in enumerate(zip(result.traces, requests, arrivals)):
        assert trace.output_tokens == max_tokens  # ignore_eos：正好 max_tokens 个
        assert trace.sent >= at - 1e-3  # 不早于它的到达时刻发出
        tpot = f"{trace.tpot * 1000:.1f} ms" if trace.tpot is not None else "无"
        print(f"  请求 {i}：提示 {trace.prompt_tokens:>3} 个 token，生成 {trace.output_tokens:>2} 个，"
              f"分 {len(trace.chunks):>2} 段到达；发出于 {trace.sent:.2f} s，TTFT {trace.ttft * 1000:.1f} ms，"
              f"TPOT {tpot}")
    s = summarize(result)
    print(f"  TTFT P50 {s['ttft_p50_ms']:.1f} ms  P99 {s['ttft_p99_ms']:.1f} ms")
    print(f"  TPOT P50 {s['tpot_p50_ms']:.1f} ms  P99 {s['tpot_p99_ms']:.1f} ms")
    print(f"  ITL  P50 {s['itl_p50_ms']:.1f} ms  P99 {s['itl_p99_ms']:.1f} ms")
    print(f"  {s['output_tokens']} 个 token 用时 {s['makespan_s']:.2f} s，吞吐 {s['throughput']:.1f} token/s")


if __name__ == "__main__":
    main()
