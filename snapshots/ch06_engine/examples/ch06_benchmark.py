"""第 6 章的基准测试（不是测试）：Engine 与 Hugging Face generate 的 decode 速度，同一次运行里比。

两边用同样的提示（等长，免得 HF 那边要处理左填充）、同样生成 N 个 token、都是贪心。
计时的口径相同：从 prefill 那一步结束，到最后一步结束，中间正好 N − 1 步 decode；
decode 速度 = 批大小 × (N − 1) / 这段时间。
数字取决于机器，只有"比值"在同一台机器上才有意义。

    python examples/ch06_benchmark.py [--new-tokens 32] [--batch-sizes 1 16]
    python examples/ch06_benchmark.py --profile --batch-sizes 16 --new-tokens 9   # 时间花在哪
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


def engine_decode_seconds(engine: Engine, prompts: list[list[int]], new_tokens: int,
                          on_prefill_done=None) -> float:
    """prefill 那一步结束到最后一步结束的时间：正好 new_tokens − 1 步 decode，含拼批的开销。"""
    stamps: list[float] = []
    forward = engine.forward_batch

    def timed_forward(batch, args):
        out = forward(batch, args)
        stamps.append(time.perf_counter())
        if len(stamps) == 1 and on_prefill_done is not None:
            on_prefill_done()
        return out

    engine.forward_batch = timed_forward  # type: ignore[method-assign]
    try:
        generate(engine, prompts, [SamplingParams(max_tokens=new_tokens)] * len(prompts))
    finally:
        del engine.forward_batch  # 恢复类上的原方法
    return stamps[-1] - stamps[0]


def hf_decode_seconds(model, prompts: list[list[int]], new_tokens: int,
                      on_prefill_done=None) -> float:
    """HF generate 每步前向之后都会调用一次 logits processor：用它打时间戳，口径与上面相同。"""
    from transformers import LogitsProcessor, LogitsProcessorList

    from minibook.hf import quiet_transformers

    stamps: list[float] = []

    class Stamp(LogitsProcessor):
        def __call__(self, input_ids, scores):
            stamps.append(time.perf_counter())
            if len(stamps) == 1 and on_prefill_done is not None:
                on_prefill_done()
            return scores

    ids = torch.tensor(prompts)
    with quiet_transformers(), torch.inference_mode():
        model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                       max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=0,
                       logits_processor=LogitsProcessorList([Stamp()]))
    assert len(stamps) == new_tokens
    return stamps[-1] - stamps[0]


def decode_rate(seconds_of, prompts, new_tokens: int, repeats: int = 3) -> float:
    """decode tokens/s：批大小 × (new_tokens − 1) / decode 用时。先预热一次，再取几次里最快的。"""
    seconds_of(prompts, 2)  # 预热：第一次调用有一次性的开销（分配内存、初始化线程池）
    best = min(seconds_of(prompts, new_tokens) for _ in range(repeats))
    return len(prompts) * (new_tokens - 1) / best


def decode_profile(seconds_of, prompts, new_tokens: int, top: int = 4) -> list[tuple[str, float]]:
    """只剖析 decode 那一段：各 aten 算子的自身 CPU 时间占这段墙钟时间的比例，取前 top 名。"""
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU])
    seconds = seconds_of(prompts, new_tokens, on_prefill_done=prof.start)  # prefill 之后才开始记
    prof.stop()
    ops = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    ops.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    return [(e.key, e.self_cpu_time_total / 1e6 / seconds) for e in ops[:top]]


def main() -> None:
    from transformers import AutoModelForCausalLM

    from minibook.hf import encode, quiet_transformers
    from minibook.models import default_model

    parser = argparse.ArgumentParser(description="Engine 与 HF 的 decode 速度对比")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--prompt-len", type=int, default=24)
    parser.add_argument("--profile", action="store_true",
                        help="不比速度，剖析 decode 时间花在哪些算子上")
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
    sides = {"Engine": lambda p, n, **kw: engine_decode_seconds(engine, p, n, **kw),
             "HF generate": lambda p, n, **kw: hf_decode_seconds(hf_model, p, n, **kw)}
    if args.profile:  # 只剖析 decode 那一段：自身 CPU 时间最多的几个 aten 算子
        for bs in args.batch_sizes:
            prompts = make_prompts(ids, bs, args.prompt_len)
            for name, seconds_of in sides.items():
                seconds_of(prompts, 2)  # 预热
                print(f"{name}，批大小 {bs}，{args.new_tokens - 1} 步 decode：")
                for op, share in decode_profile(seconds_of, prompts, args.new_tokens):
                    print(f"    {op:<50} {share:6.1%}")
        engine.shutdown()
        return
    print("| 批大小 | Engine decode tok/s | HF decode tok/s | Engine / HF |")
    print("| ---: | ---: | ---: | ---: |")
    for bs in args.batch_sizes:
        prompts = make_prompts(ids, bs, args.prompt_len)
        ours = decode_rate(sides["Engine"], prompts, args.new_tokens)
        theirs = decode_rate(sides["HF generate"], prompts, args.new_tokens)
        print(f"| {bs} | {ours:.1f} | {theirs:.1f} | {ours / theirs:.2f}× |")
    engine.shutdown()


if __name__ == "__main__":
    main()
