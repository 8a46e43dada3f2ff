"""第 19 章的 main：本书的 C++ 算子怎么登记、decode 的线性层为什么慢、C++ GEMV 和量化各快多少、结果还对不对。

运行：python examples/ch19_kernels.py
"""

from __future__ import annotations

import os
import statistics
import time

import torch
import torch.nn.functional as F

from minibook.hf import encode, hf_greedy
from minibook.models import smollm2, tiny_qwen3
from minisgl.core import SamplingParams
from minisgl.kernel import load_kernels
from minisgl.kvcache.mha_pool import _store_kv
from minisgl.layers.hugepages import copy_to_huge_pages, huge_page_bytes
from minisgl.layers.norm import rms_norm
from minisgl.layers.quant import (GROUP, Int4Matmul, Int8Matmul, dequantize_int4, dequantize_int8, quantize_int4,
                                  quantize_int8)
from minisgl.llm import LLM

PROMPTS = ["The capital of France is", "def add(a, b):", "Once upon a time,"]
OPS = ["paged_attention", "store_kv", "linear_f32", "linear_int8", "linear_int4", "rms_norm", "add_rms_norm"]


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
        print(f"  {getattr(torch.ops.minisgl, name).default._schema}")


def total_bytes(tensors) -> int:
    return sum(t.nbytes for t in tensors)


def timed(fn, repeat: int = 7, inner: int = 1) -> float:
    """fn 的一次调用要几秒：预热一次，量 repeat 轮（每轮连调 inner 次），取中位数。"""
    fn()  # 预热
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - start) / inner)
    return statistics.median(times)


def section_bandwidth(weights: dict[str, torch.Tensor]) -> None:
    load_kernels()
    threads = torch.get_num_threads()
    print(f"\n二、一步 decode 的 {len(weights)} 个线性层，批大小 1（{threads} 个线程，7 次取中位数）")
    xs = {k: torch.randn(1, k) for k in {w.shape[1] for w in weights.values()}}
    before = huge_page_bytes()
    dense = list(weights.values())
    big = copy_to_huge_pages(dense)  # 同样的权重，拷进大页
    # 量化的两种都和引擎一样：LM head 是 int8（见 layers/quant.py），权重是 16 行交错的块
    int8 = [Int8Matmul(w) for w in dense]
    int4 = [Int4Matmul(w) for w in dense[:-1]] + int8[-1:]
    for layers in (int8, int4[:-1]):
        for layer, blocks in zip(layers, copy_to_huge_pages([layer.blocks for layer in layers])):
            layer.blocks = blocks
    print(f"  拷进大页的权重：{(huge_page_bytes() - before) / 1e6:.0f} MB 落在 2 MB 的页上")
    ops = torch.ops.minisgl

    def quantized(layers):  # 每一层的 x 有 K = 组数 × 32 列
        return lambda: [layer(xs[layer.blocks.shape[1] * GROUP]) for layer in layers]

    ways = {
        "torch F.linear": (lambda: [F.linear(xs[w.shape[1]], w) for w in dense], total_bytes(dense)),
        "C++ linear_f32": (lambda: [ops.linear_f32(xs[w.shape[1]], w) for w in dense], total_bytes(dense)),
        "C++ f32，大页": (lambda: [ops.linear_f32(xs[w.shape[1]], w) for w in big], total_bytes(big)),
        "C++ int8，大页": (quantized(int8), total_bytes(layer.blocks for layer in int8)),
        "C++ int4，大页": (quantized(int4), total_bytes(layer.blocks for layer in int4)),
    }
    base = None
    for name, (fn, size) in ways.items():
        seconds = timed(fn)
        base = base or seconds
        print(f"  {name:<15} {seconds * 1e3:6.1f} ms   读 {size / 1e6:5.0f} MB   {size / seconds / 1e9:5.1f} GB/s"
              f"   比 F.linear 快 {base / seconds:4.2f} 倍")
    # 行多时：float32 交给 torch 的 GEMM（引擎也这样），量化的两种仍走 C++（每 8 行一趟）；LM head 不算在内
    print(f"  x 有 M 行时（prefill、大批 decode），LM head 以外的 {len(dense) - 1} 层：")
    for rows in (16, 64, 256):
        xm = {k: torch.randn(rows, k) for k in xs}
        t32 = timed(lambda: [F.linear(xm[w.shape[1]], w) for w in big[:-1]], repeat=3)
        t8 = timed(lambda: [layer(xm[layer.blocks.shape[1] * GROUP]) for layer in int8[:-1]], repeat=3)
        t4 = timed(lambda: [layer(xm[layer.blocks.shape[1] * GROUP]) for layer in int4[:-1]], repeat=3)
        print(f"  M = {rows:>3}  float32 GEMM {t32 * 1e3:6.1f} ms   C++ int8 {t8 * 1e3:6.1f} ms（快 {t32 / t8:4.2f} 倍）"
              f"   C++ int4 {t4 * 1e3:6.1f} ms（快 {t32 / t4:4.2f} 倍）")


def section_small_ops() -> None:
    print("\n三、另外两个算子，和它们换掉的 torch 写法比（SmolLM2 的形状，一次调用，微秒）")
    load_kernels()
    hidden, eps, ops = 576, 1e-5, torch.ops.minisgl
    weight = torch.randn(hidden)
    for rows in (1, 32):
        x, residual = torch.randn(rows, hidden), torch.randn(rows, hidden)

        def torch_way():
            s = x + residual
            return rms_norm(s, weight, eps), s

        t_torch = timed(torch_way, inner=200)
        t_cpp = timed(lambda: ops.add_rms_norm(x, residual, weight, eps), inner=200)
        nbytes = 4 * (4 * rows * hidden + hidden)  # 读 x、residual、weight，写两个输出
        diff = (ops.add_rms_norm(x, residual, weight, eps)[0] - torch_way()[0]).abs().max().item()
        print(f"  残差相加 + RMSNorm  {rows:>2} 行  torch {t_torch * 1e6:5.1f}  C++ {t_cpp * 1e6:5.1f}"
              f"  快 {t_torch / t_cpp:4.1f} 倍  C++ 的带宽 {nbytes / t_cpp / 1e9:5.2f} GB/s  和 torch 最大差 {diff:.1e}")
    pool = torch.zeros(2, 30, 4096, 3, 64)  # [K/V, 层, 槽位, KV 头, head_dim]
    for rows in (1, 32):
        k, v = torch.randn(rows, 3, 64), torch.randn(rows, 3, 64)
        loc = torch.randperm(4096)[:rows]
        t_torch = timed(lambda: _store_kv(pool, k, v, loc, 7), inner=200)
        t_cpp = timed(lambda: ops.store_kv(pool, k, v, loc, 7), inner=200)
        nbytes = 2 * 2 * rows * 3 * 64 * 4  # K、V 各读一遍、写一遍
        print(f"  store_kv            {rows:>2} 行  torch {t_torch * 1e6:5.1f}  C++ {t_cpp * 1e6:5.1f}"
              f"  快 {t_torch / t_cpp:4.1f} 倍  C++ 的带宽 {nbytes / t_cpp / 1e9:5.2f} GB/s")
    assert torch.equal(pool[0, 7, loc], k) and torch.equal(pool[1, 7, loc], v)
    print("  一步 decode：RMSNorm 61 次（每层两次，最后一次），store_kv 30 次")


def section_paged_attention() -> None:
    """第 17 章的分页注意力，本章重写了内层循环：一层要读的 K、V 有多少字节，多快读完。"""
    from ch11_benchmark import read_bandwidth

    load_kernels()
    ops, hq, hkv, d = torch.ops.minisgl, 9, 3, 64  # SmolLM2 的头
    print(f"\n四、分页注意力的一层 decode（9 个 q 头、3 个 KV 头、head_dim 64，槽位打散；"
          f"{torch.get_num_threads()} 个线程，7 次取中位数）")
    print(f"  这台机器读内存 {read_bandwidth() / 1e9:.1f} GB/s（对 512 MiB 的张量求和，同样的线程数）")
    for batch, context in ((1, 1024), (16, 256), (32, 1024)):
        gen = torch.Generator().manual_seed(batch)
        slots = batch * context
        k_cache, v_cache = torch.randn(slots, hkv, d, generator=gen), torch.randn(slots, hkv, d, generator=gen)
        # 池子用久了，一个请求的槽位就是散的：页表里放一个随机排列
        table = torch.randperm(slots, generator=gen).to(torch.int32).view(batch, context)
        rows, indptr = torch.arange(batch, dtype=torch.int32), torch.arange(batch + 1, dtype=torch.int32)
        lens = torch.full((batch,), context, dtype=torch.int32)
        q = torch.randn(batch, hq, d, generator=gen)

        def paged():
            return ops.paged_attention(q, k_cache, v_cache, table, rows, indptr, lens, d ** -0.5)

        def copied():  # 参考后端的做法：按页表把 K、V 拷成连续的一块，再交给 SDPA
            k, v = k_cache[table.long()].transpose(1, 2), v_cache[table.long()].transpose(1, 2)
            return F.scaled_dot_product_attention(q.unsqueeze(2), k, v, enable_gqa=True).squeeze(2)

        diff = (paged() - copied()).abs().max().item()
        t_paged, t_copied = timed(paged), timed(copied)
        kv_bytes = 2 * slots * hkv * d * 4
        print(f"  批 {batch:>2}、上下文 {context:>4}：K、V 共 {kv_bytes / 1e6:5.1f} MB  paged {t_paged * 1e3:6.3f} ms"
              f"（{kv_bytes / t_paged / 1e9:4.1f} GB/s）  拷出来再 SDPA {t_copied * 1e3:6.3f} ms  "
              f"快 {t_copied / t_paged:4.1f} 倍  最大差 {diff:.1e}")


def section_error(weights: dict[str, torch.Tensor]) -> None:
    print("\n五、量化误差：‖解回来的权重 - 原权重‖ / ‖原权重‖，LM head 以外的线性层合在一起")
    from safetensors import safe_open

    with safe_open(tiny_qwen3() / "model.safetensors", "pt") as f:
        tiny = {n: f.get_tensor(n).float() for n in f.keys() if n.endswith("proj.weight")}
    layers = {n: w for n, w in weights.items() if n != "lm_head"}
    for label, ws in (("SmolLM2", layers), ("tiny Qwen3（随机权重）", tiny)):
        total = sum(w.square().sum() for w in ws.values()).sqrt()
        e8 = sum((dequantize_int8(*quantize_int8(w)) - w).square().sum() for w in ws.values()).sqrt()
        e4 = sum((dequantize_int4(*quantize_int4(w)) - w).square().sum() for w in ws.values()).sqrt()
        print(f"  {label:<22} int8 {e8 / total:.2e}   int4 {e4 / total:.2e}")
    head = weights["lm_head"]
    e4 = (dequantize_int4(*quantize_int4(head)) - head).norm() / head.norm()
    e8 = (dequantize_int8(*quantize_int8(head)) - head).norm() / head.norm()
    print(f"  SmolLM2 的 LM head（= 词嵌入） int8 {e8:.2e}   int4 {e4:.2e}")
    groups = torch.cat([w.reshape(-1, 32) for w in layers.values()]).sort(dim=1).values
    distinct = 1 + (groups.diff(dim=1) != 0).sum(dim=1)
    print(f"  SmolLM2 的线性层共 {len(groups)} 组（每组 32 个数），一组里不同的值最多 {distinct.max().item()} 种"
          "（它们本来就是从 Q4_1 反量化来的）")


def section_engine() -> None:
    print("\n六、整个引擎：贪心生成 16 个 token，和 HF 比")
    for label, path in (("SmolLM2", smollm2()), ("tiny Qwen3", tiny_qwen3())):
        prompts = [encode(path, t) for t in PROMPTS]
        plain = [hf_greedy(path, p, 16) for p in prompts]
        for setting in (dict(cpu_kernels="cpp"), dict(quantization="int8"), dict(quantization="int4")):
            llm = LLM(path, max_running_req=4, num_page_override=300, max_seq_len_override=64, **setting)
            outs = [o["token_ids"] for o in llm.generate(prompts, SamplingParams(max_tokens=16, ignore_eos=True))]
            llm.shutdown()
            same = sum(sum(a == b for a, b in zip(o, r)) for o, r in zip(outs, plain))
            name = next(iter(setting.values()))
            print(f"  {label:<10} {name:<4}  与原始 HF 相同的 token {same}/{16 * len(prompts)}"
                  f"   整段相同的提示 {sum(o == r for o, r in zip(outs, plain))}/{len(prompts)}")
            if name == "cpp":  # 不量化：逐 token 相同
                assert outs == plain


def main() -> None:
    torch.set_num_threads(min(2, torch.get_num_threads()))
    section_registry()
    weights = smollm2_linear_weights()
    section_bandwidth(weights)
    section_small_ops()
    section_paged_attention()
    section_error(weights)
    section_engine()
    print(f"\n（机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}）")


if __name__ == "__main__":
    main()
