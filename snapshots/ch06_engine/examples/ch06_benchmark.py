"""第 6 章的基准测试（不是测试）：Engine 与 Hugging Face generate 的 decode 速度，同一次运行里比。

两边用同样的提示（等长，免得 HF 那边要处理左填充）、同样生成 N 个 token、都是贪心。
decode 速度 = 批大小 × (N − 1) / (生成 N 个的时间 − 只做 prefill 的时间)。
数字取决于机器，只有"比值"在同一台机器上才有意义。

    python examples/ch06_benchmark.py [--new-tokens 32] [--batch-sizes 1 16]
"""

from __future__ import annotations

import argparse
import time

import torch

from ch06_engine import generate  # 同目录的本章 main：手写的迷你调度器
from minisgl.core import SamplingParams
from minisgl.engine import Engine, EngineConfig

TEXT = (
    "The history of computing is a story of ideas building on one another. Early machines "
    "were mechanical, then electrical, and finally electronic; each step made them faster, "
    "smaller and cheaper, until a computer fit in every pocket and every home."
)


def make_prompts(ids: list[int], batch_size: int, length: int) -> list[list[int]]:
    """从同一段文字里错开起点取出 batch_size 个等长的提示。"""
    return [ids[i : i + length] for i in range(batch_size)]


def time_engine(engine: Engine, prompts: list[list[int]], new_tokens: int) -> float:
    start = time.perf_counter()
    generate(engine, prompts, [SamplingParams(max_tokens=new_tokens)] * len(prompts))
    return time.perf_counter() - start


def time_hf(model, prompts: list[list[int]], new_tokens: int) -> float:
    from minibook.hf import quiet_transformers

    ids = torch.tensor(prompts)
    start = time.perf_counter()
    with quiet_transformers(), torch.inference_mode():
        model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                       max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                       pad_token_id=0, eos_token_id=None)
    return time.perf_counter() - start


def decode_rate(run, prompts, new_tokens: int) -> float:
    run(prompts, 1)  # 预热：第一次调用有一次性的开销（分配、初始化线程池）
    full = min(run(prompts, new_tokens) for _ in range(2))
    prefill = min(run(prompts, 1) for _ in range(2))
    return len(prompts) * (new_tokens - 1) / max(full - prefill, 1e-9)


def main() -> None:
    from transformers import AutoModelForCausalLM

    from minibook.hf import encode, quiet_transformers
    from minibook.models import default_model

    parser = argparse.ArgumentParser(description="Engine 与 HF 的 decode 速度对比")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--prompt-len", type=int, default=24)
    args = parser.parse_args()

    path = default_model()
    ids = encode(path, TEXT)
    if len(ids) < args.prompt_len + max(args.batch_sizes):
        raise SystemExit(f"示例文字太短：只有 {len(ids)} 个 token")
    engine = Engine(EngineConfig(model_path=path, max_running_req=max(args.batch_sizes),
                                 max_seq_len_override=args.prompt_len + args.new_tokens + 8,
                                 num_page_override=max(args.batch_sizes) * (args.prompt_len + args.new_tokens + 8)))
    with quiet_transformers():
        hf_model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()

    print(f"模型 {path.name}，float32，{torch.get_num_threads()} 个线程；"
          f"提示 {args.prompt_len} token，生成 {args.new_tokens} token，贪心")
    print("| 批大小 | Engine decode tok/s | HF decode tok/s | Engine / HF |")
    print("| ---: | ---: | ---: | ---: |")
    for bs in args.batch_sizes:
        prompts = make_prompts(ids, bs, args.prompt_len)
        ours = decode_rate(lambda p, n: time_engine(engine, p, n), prompts, args.new_tokens)
        theirs = decode_rate(lambda p, n: time_hf(hf_model, p, n), prompts, args.new_tokens)
        print(f"| {bs} | {ours:.1f} | {theirs:.1f} | {ours / theirs:.2f}× |")
    engine.shutdown()


if __name__ == "__main__":
    main()
