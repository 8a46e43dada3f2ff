"""第 19 章的测量：批大小 1 的 decode 有多快——我们的几种线性层 vs Hugging Face vs llama.cpp，同一次运行里。

每个线程数（1、2）一个新进程：线程数在进程开始时定下，所有参赛者用同样的线程数。每个参赛者都从同一个
提示出发贪心地生成，只算 decode：相邻两个新 token 出来的间隔取中位数，速率 = 1 / 这个中位数（机器是
共用的，别的进程偶尔抢走几十毫秒：中位数不受这几步影响，平均数受）。
参赛者轮流跑 ROUNDS 轮，取中位数（机器是共用的：轮流跑，负载的起伏平摊到每个参赛者身上）。
llama.cpp 是可选的（python -m minibook.llamacpp install / prepare），没装就不比它。
直接运行打印全部结果：python examples/ch19_bench.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import torch

from ch18_bench import in_subprocess, no_overlap
from minibook import llamacpp
from minibook.hf import encode
from minibook.models import smollm2

PROMPT = "Write a short story about a robot who learns to paint. Once upon a time,"
NEW_TOKENS = 64
ROUNDS = 3
# llama.cpp 一次喂几个 token。写本章的一台机器（带 AVX-512 的 Xeon）上，llama-cpp-python 0.3.36 的 Q4_1
# 一次喂多于一个 token 就段错误；这里只量 decode（本来就一次一个 token），困惑度逐个喂也是同样的 logits
LLAMACPP_BATCH = 1
# 我们的参赛者：名字 → LLM 的设置。第一个是上一章的默认（torch 的 F.linear）；“C++ 外壳”是
# compile_cpp_wrapper：编译出的一步由 C++ 依次调用各个内核
SHELL = dict(cuda_graph_bs=(1,), compile_cpp_wrapper=True)
OURS = {
    "minisgl torch 算子": dict(cpu_kernels="torch"),
    "minisgl C++ 算子": dict(cpu_kernels="cpp"),
    "minisgl C++ + 编译": dict(cpu_kernels="cpp", cuda_graph_bs=(1,)),
    "minisgl C++ + 编译 + C++ 外壳": dict(cpu_kernels="cpp", **SHELL),
    "minisgl int8 + 编译 + C++ 外壳": dict(quantization="int8", **SHELL),
    "minisgl int4 + 编译 + C++ 外壳": dict(quantization="int4", **SHELL),
}


def our_rate(prompt: list[int], **fields) -> tuple[float, list[int]]:
    """建一个引擎，贪心生成 NEW_TOKENS 个 token：decode 每秒几个 token，和生成的 token。"""
    from minisgl.core import SamplingParams
    from minisgl.llm import LLM

    with no_overlap():  # 不重叠：每一步当场算完
        llm = LLM(smollm2(), max_running_req=1, num_page_override=len(prompt) + NEW_TOKENS + 8,
                  max_seq_len_override=len(prompt) + NEW_TOKENS + 4, **fields)
    stamps: list[float] = []
    forward = llm.engine._forward_and_sample

    def stamped(batch, args, out=None):
        result = forward(batch, args, out)
        stamps.append(time.perf_counter())  # 每一步（prefill 出第一个 token，之后每步一个）结束的时刻
        return result

    llm.engine._forward_and_sample = stamped
    ids = llm.generate([prompt], SamplingParams(max_tokens=NEW_TOKENS, ignore_eos=True))[0]["token_ids"]
    llm.shutdown()
    return per_second(stamps), ids


def per_second(stamps: list[float]) -> float:
    """相邻时刻之差的中位数的倒数：每秒几个 token。"""
    return 1.0 / statistics.median(b - a for a, b in zip(stamps, stamps[1:]))


def hf_rate(model, prompt: list[int]) -> tuple[float, list[int]]:
    from transformers import GenerationConfig
    from transformers.generation.streamers import BaseStreamer

    class Stamps(BaseStreamer):  # generate 每出一个 token 调一次 put（第一次是提示本身）
        def __init__(self) -> None:
            self.times: list[float] = []

        def put(self, value) -> None:
            self.times.append(time.perf_counter())

        def end(self) -> None:
            pass

    streamer = Stamps()
    ids = torch.tensor([prompt])
    config = GenerationConfig(do_sample=False, max_new_tokens=NEW_TOKENS, eos_token_id=None, pad_token_id=0)
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config, streamer=streamer)
    return per_second(streamer.times[1:]), out[0, len(prompt):].tolist()  # 去掉提示那一次：从第一个新 token 起


def llamacpp_rate(model, prompt: list[int]) -> tuple[float, list[int]]:
    stamps, ids = [], []
    for token in model.generate(prompt, temp=0.0, top_k=1, repeat_penalty=1.0, reset=True):
        stamps.append(time.perf_counter())
        ids.append(token)
        if len(ids) == NEW_TOKENS:
            break
    return per_second(stamps), ids


def measure(threads: int) -> dict:
    """在本进程里量全部参赛者（本进程的线程数 = threads）。返回 {名字: {"rate": 中位数, "same_as_hf": ...}}。"""
    from transformers import AutoModelForCausalLM

    from minibook.hf import quiet_transformers

    torch.set_num_threads(threads)
    path = smollm2()
    prompt = encode(path, PROMPT)
    with quiet_transformers():
        hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    peers = {}
    if llamacpp.available() is None:
        from llama_cpp import Llama

        for kind, gguf in llamacpp.gguf_paths().items():
            peers[f"llama.cpp {kind}"] = Llama(model_path=str(gguf), n_ctx=512, n_batch=LLAMACPP_BATCH,
                                               n_threads=threads, n_threads_batch=threads, verbose=False)
    rates: dict[str, list[float]] = {}
    tokens: dict[str, list[int]] = {}
    for _ in range(ROUNDS):
        for name in ["HF transformers", *OURS, *peers]:
            if name == "HF transformers":
                rate, ids = hf_rate(hf, prompt)
            elif name in OURS:
                rate, ids = our_rate(prompt, **OURS[name])
            else:
                rate, ids = llamacpp_rate(peers[name], prompt)
            rates.setdefault(name, []).append(rate)
            tokens[name] = ids
    hf_ids = tokens["HF transformers"]
    return {name: {"rate": statistics.median(r), "same_as_hf": sum(a == b for a, b in zip(tokens[name], hf_ids))}
            for name, r in rates.items()}


def decode_rates(threads: int) -> dict:
    """在新进程里 measure(threads)：线程数在进程一开始就定下。"""
    code = f"import json; from ch19_bench import measure; print(json.dumps(measure({threads})))"
    return json.loads(in_subprocess(code, OMP_NUM_THREADS=str(threads)))


# 算困惑度的固定文本（本书自己写的一段话，不在任何训练集里）
PPL_TEXT = (
    "The old lighthouse keeper climbed the stairs every evening to light the lamp. Ships passing in the night "
    "relied on its steady beam to find their way around the rocky point. One winter the storms grew so fierce "
    "that the keeper could not leave the tower for a week. He kept a journal of the waves, the wind and the few "
    "boats that dared to sail. When spring came, the village children asked him to teach them how the lamp worked, "
    "and he showed them the lenses, the gears and the small flame that could be seen twenty miles away."
)


def perplexities() -> dict[str, float]:
    """PPL_TEXT 上的困惑度：HF float32、HF 换上我们的 int8 / int4 权重并且每个线性层的输入同样取整（和引擎
    算的是同一个式子）、llama.cpp。"""
    from minibook.hf import hf_perplexity
    from minisgl.layers.quant import (dequantize_int4, dequantize_int8, quantize_int4, quantize_int8,
                                      round_activations)

    def round8(name, w):
        return dequantize_int8(*quantize_int8(w))

    def round4(name, w):  # LM head 在 int4 模式下也是 int8，和引擎一样
        return round8(name, w) if name == "lm_head" else dequantize_int4(*quantize_int4(w))

    path = smollm2()
    ids = encode(path, PPL_TEXT)
    result = {"HF float32": hf_perplexity(path, ids),
              "int8（HF 算）": hf_perplexity(path, ids, round8, round_activations),
              "int4（HF 算）": hf_perplexity(path, ids, round4, round_activations)}
    if llamacpp.available() is None:
        import numpy as np
        from llama_cpp import Llama

        for kind, gguf in llamacpp.gguf_paths().items():
            model = Llama(model_path=str(gguf), n_ctx=512, n_batch=LLAMACPP_BATCH, logits_all=True,
                          verbose=False)
            model.eval(ids)
            logits = torch.from_numpy(np.asarray(model.scores[: len(ids) - 1], dtype=np.float32))
            result[f"llama.cpp {kind}"] = torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:])).exp().item()
    return result


def main() -> None:
    reason = llamacpp.available()
    print(f"SmolLM2，float32 权重，批大小 1，提示 {len(encode(smollm2(), PROMPT))} 个 token，"
          f"decode {NEW_TOKENS} 个，{ROUNDS} 轮取中位数" + (f"；llama.cpp：{reason}" if reason else ""))
    for threads in (1, 2):
        result = decode_rates(threads)
        hf = result["HF transformers"]["rate"]
        print(f"\n{threads} 个线程：")
        for name, r in result.items():
            print(f"  {name:<28} {r['rate']:6.1f} token/s   {r['rate'] / hf:4.2f}× HF   "
                  f"和 HF 相同的 token {r['same_as_hf']}/{NEW_TOKENS}")
    print(f"\n一段 {len(encode(smollm2(), PPL_TEXT))} 个 token 的固定文本上的困惑度：")
    for name, ppl in perplexities().items():
        print(f"  {name:<20} {ppl:.4f}")
    print(f"（机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}）")


if __name__ == "__main__":
    sys.exit(main())
