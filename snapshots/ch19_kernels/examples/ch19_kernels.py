"""第 19 章的 main：本书的 C++ 算子怎么登记、decode 的线性层为什么慢、C++ GEMV 和量化各快多少、结果还对不对。

运行：python examples/ch19_kernels.py
"""

from __future__ import annotations

import os
import statistics
import time

import torch
import torch.nn.functional as F

from minibook.hf import encode, hf_greedy, hf_greedy_rounded
from minibook.models import smollm2, tiny_qwen3
from minisgl.core import SamplingParams
from minisgl.kernel import load_kernels
from minisgl.layers.quant import dequantize_int4, dequantize_int8, quantize_int4, quantize_int8
from minisgl.llm import LLM

PROMPTS = ["The capital of France is", "def add(a, b):", "Once upon a time,"]
OPS = ["paged_attention", "store_kv", "linear_f32", "linear_int8", "linear_int4"]


def smollm2_linear_weights() -> dict[str, torch.Tensor]:
    """SmolLM2 的全部线性层权重（q/k/v、gate/up 合并，和引擎里一样），外加 LM head（= 词嵌入）。"""
    from safetensors import safe_open

    with safe_open(smollm2() / "model.safetensors", "pt") as f:
        raw = {name: f.get_tensor(name).float() for name in f.keys()}
    weights = {}
    for i in range(30):
        p = f"model.layers.{i}."
        weights[p + "qkv"] = torch.cat([raw[p + f"self_attn.{n}_proj.weight"] for n in "qkv"])
        weights[p + "o"] = raw[p + "self_attn.o_proj.weight"]
        weights[p + "gate_up"] = torch.cat([raw[p + "mlp.gate_proj.weight"], raw[p + "mlp.up_proj.weight"]])
        weights[p + "down"] = raw[p + "mlp.down_proj.weight"]
    weights["lm_head"] = raw["model.embed_tokens.weight"]
    return weights


def section_registry() -> None:
    print("一、登记过的算子：torch.ops.minisgl.*")
    start = time.perf_counter()
    load_kernels()
    print(f"  load_kernels() 用了 {time.perf_counter() - start:.2f} 秒（缓存里有编好的库就只是加载）")
    for name in OPS:
        schema = torch._C._dispatch_find_schema_or_throw(f"minisgl::{name}", "")
        print(f"  {schema}")


def timed(fn, repeat: int = 7) -> float:
    fn()  # 预热
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def section_bandwidth(weights: dict[str, torch.Tensor]) -> None:
    threads = torch.get_num_threads()
    print(f"\n二、一步 decode 的 {len(weights)} 个线性层，批大小 1（{threads} 个线程，7 次取中位数）")
    xs = {k: torch.randn(1, k) for k in {w.shape[1] for w in weights.values()}}
    q8 = {n: quantize_int8(w) for n, w in weights.items()}
    q4 = {n: quantize_int4(w) for n, w in weights.items()}
    ops = torch.ops.minisgl
    ways = {
        "torch F.linear": (lambda: [F.linear(xs[w.shape[1]], w) for w in weights.values()],
                           sum(w.numel() * 4 for w in weights.values())),
        "C++ linear_f32": (lambda: [ops.linear_f32(xs[w.shape[1]], w) for w in weights.values()],
                           sum(w.numel() * 4 for w in weights.values())),
        "C++ linear_int8": (lambda: [ops.linear_int8(xs[q.shape[1]], q, d) for q, d in q8.values()],
                            sum(q.numel() + d.numel() * 4 for q, d in q8.values())),
        "C++ linear_int4": (lambda: [ops.linear_int4(xs[q.shape[1] * 2], q, d, m) for q, d, m in q4.values()],
                            sum(q.numel() + (d.numel() + m.numel()) * 4 for q, d, m in q4.values())),
    }
    base = None
    for name, (fn, nbytes) in ways.items():
        seconds = timed(fn)
        base = base or seconds
        print(f"  {name:<16} {seconds * 1e3:6.1f} ms   读 {nbytes / 1e6:5.0f} MB   {nbytes / seconds / 1e9:5.1f} GB/s"
              f"   比 F.linear 快 {base / seconds:4.2f} 倍")


def section_error(weights: dict[str, torch.Tensor]) -> None:
    print("\n三、量化误差：‖解回来的权重 - 原权重‖ / ‖原权重‖，全部线性层合在一起")
    from safetensors import safe_open

    with safe_open(tiny_qwen3() / "model.safetensors", "pt") as f:
        tiny = {n: f.get_tensor(n).float() for n in f.keys() if n.endswith("proj.weight")}
    for label, ws in (("SmolLM2", weights), ("tiny Qwen3（随机权重）", tiny)):
        total = sum(w.square().sum() for w in ws.values()).sqrt()
        e8 = sum((dequantize_int8(*quantize_int8(w)) - w).square().sum() for w in ws.values()).sqrt()
        e4 = sum((dequantize_int4(*quantize_int4(w)) - w).square().sum() for w in ws.values()).sqrt()
        print(f"  {label:<22} int8 {e8 / total:.2e}   int4 {e4 / total:.2e}")
    w = weights["model.layers.3.down"]
    print(f"  SmolLM2 第 3 层 down_proj 的第一组 32 个数里有 {w[0, :32].unique().numel()} 种不同的值"
          "（它本来就是从 Q4_1 反量化来的）")


def section_engine() -> None:
    print("\n四、整个引擎：贪心生成 16 个 token，和 HF 比")

    def round8(name, w):
        return dequantize_int8(*quantize_int8(w))

    def round4(name, w):
        return round8(name, w) if name == "lm_head" else dequantize_int4(*quantize_int4(w))

    for label, path in (("SmolLM2", smollm2()), ("tiny Qwen3", tiny_qwen3())):
        prompts = [encode(path, t) for t in PROMPTS]
        plain = [hf_greedy(path, p, 16) for p in prompts]
        for setting, reference in ((dict(linear_kernel="cpp"), None), (dict(quantization="int8"), round8),
                                   (dict(quantization="int4"), round4)):
            llm = LLM(path, max_running_req=4, num_page_override=300, max_seq_len_override=64, **setting)
            outs = [o["token_ids"] for o in llm.generate(prompts, SamplingParams(max_tokens=16, ignore_eos=True))]
            llm.shutdown()
            refs = plain if reference is None else [hf_greedy_rounded(path, p, 16, reference) for p in prompts]
            same_ref = sum(o == r for o, r in zip(outs, refs))
            same_plain = sum(sum(a == b for a, b in zip(o, r)) for o, r in zip(outs, plain))
            name = next(iter(setting.values()))
            print(f"  {label:<10} {name:<4}  与{'同样量化的 ' if reference else ''}HF 完全相同的提示 {same_ref}/{len(prompts)}"
                  f"   与原始 HF 相同的 token {same_plain}/{16 * len(prompts)}")
            assert same_ref == len(prompts)


def main() -> None:
    torch.set_num_threads(min(2, torch.get_num_threads()))
    section_registry()
    weights = smollm2_linear_weights()
    section_bandwidth(weights)
    section_error(weights)
    section_engine()
    print(f"\n（机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}）")


if __name__ == "__main__":
    main()
