"""第 21 章的消融和同行对比（不是测试）：同一份负载、同一次运行。

消融：每个配置起一个真的服务器（python -m minisgl），在“全开”之上只改一个开关；在线客户端一次发出
全部请求（rate=inf），ROUNDS 轮、每轮一个种子（同一轮里每个配置拿到同一份请求），取中位数。
温度 0：每个配置生成的文字都和全开的逐字比一遍。

同行：离线、同一份 token id 的负载，我们的 LLM.generate（离线的默认加上编译 decode）对 HF generate
（第 11 章的写法：每 16 个一批、左填充）和 llama.cpp（装了才有；llama-cpp-python 的高层接口一次只跑一个请求）。

    python examples/ch21_ablation.py            # 全部，安静的 2 核机器上十几分钟
    python examples/ch21_ablation.py --quick    # 每个配置一轮、请求少，看看能不能跑通
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from minibook import llamacpp
from minibook.models import smollm2
from minisgl.benchmark import launch_server, random_workload, run_offline, run_online, summarize
from minisgl.utils.hf import load_tokenizer

THREADS = 2
ROUNDS = 3
MAX_RUNNING = 16
# 只比 llama.cpp 的 F32（和我们同一组 float32 权重）。Q4_1 在写本章的机器（带 AVX-512 的 Xeon）上一次喂
# 多于一个提示 token 就段错误（llama-cpp-python 0.3.36，第 19 章），逐个喂时几百个 token 的提示占了它大半
# 时间，量出的数说明不了 Q4_1；它的 decode 第 19 章比过
LLAMACPP_KINDS = ("F32",)
OURS = "minisgl（LLM.generate + 编译）"
# 负载：16 个请求同时到，共享一段 128 token 的“系统提示”，后面各自 32～256 个 token，各生成 32～128 个
WORKLOAD = dict(num_requests=16, input_len=(32, 256), output_len=(32, 128), shared_prefix=128, vocab_size=10000)
# 全开 = 服务器的默认（radix、每块 256 token、块间插 decode、重叠、paged 注意力、C++ 算子、页大小 1）
# 再加上编译 decode（批大小 1、2、4、8、16）
FULL = ["--max-running-requests", str(MAX_RUNNING), "--cuda-graph-max-bs", str(MAX_RUNNING)]
# 名字 → (在 FULL 之后追加的旗标（argparse 取最后一次出现的值），额外的环境变量)
ROWS: dict[str, tuple[list[str], dict[str, str]]] = {
    "全开": ([], {}),
    "前缀缓存 naive（第 9 章）": (["--cache-type", "naive"], {}),
    "prefill 不分块（第 10 章）": (["--max-prefill-length", "8192"], {}),
    "块间不插 decode（第 10 章）": (["--no-decode-between-chunks"], {}),
    "不重叠调度（第 11 章）": ([], {"MINISGL_DISABLE_OVERLAP_SCHEDULING": "1"}),
    "注意力全用 SDPA（第 17 章）": (["--attention-backend", "torch"], {}),
    "不编译（第 18 章）": (["--cuda-graph-max-bs", "0"], {}),
    # CPU 上 TP>1 不能编译（gloo 的集合通信不进 torch.compile 的图），所以这一行该和“不编译”比
    "TP=3、不编译（第 16 章）": (["--tp-size", "3", "--cuda-graph-max-bs", "0"], {}),
    "torch 算子（第 19 章）": (["--cpu-kernels", "torch"], {}),
    "页大小 16": (["--page-size", "16"], {}),
    "int4 权重（第 19 章）": (["--quantization", "int4"], {}),
}


def text_requests(seed: int, quick: bool) -> list[tuple[str, int]]:
    """这一轮的请求：随机 token id 解码成文字（服务器收的是文字），和各自的 max_tokens。"""
    tok = load_tokenizer(smollm2())
    spec = dict(WORKLOAD, num_requests=4) if quick else WORKLOAD
    return [(tok.decode(r.prompt_ids), r.max_tokens) for r in random_workload(seed=seed, **spec)]


def ablate_one(name: str, rounds: int, quick: bool) -> dict:
    """起这个配置的服务器，先发一个短请求热身，再跑 rounds 轮。返回每轮的摘要和文字。"""
    flags, env = ROWS[name]
    runs = []
    with launch_server("--model-path", str(smollm2()), *FULL, *flags,
                       env={"OMP_NUM_THREADS": str(THREADS), **env}) as url:
        run_online(url, [("Hello", 4)], rate=float("inf"))
        for seed in range(rounds):
            result = run_online(url, text_requests(seed, quick), rate=float("inf"))
            runs.append({"summary": summarize(result), "texts": [t.text for t in result.traces],
                         "prompt_tokens": sum(t.prompt_tokens for t in result.traces)})
    return {"runs": runs}


def ablate_rows(names: list[str], quick: bool = False) -> dict:
    """几个配置各跑一遍，返回原始结果（notebook 把 11 行分几个单元跑：一个单元不超过 20 分钟）。"""
    return {name: ablate_one(name, 1 if quick else ROUNDS, quick) for name in names}


def ablation_table(raw: dict) -> dict:
    """每个配置：吞吐和延迟的中位数（跨轮），与全开同一请求文字相同的个数。"""
    full = raw["全开"]["runs"]
    table = {}
    for name, r in raw.items():
        runs = r["runs"]
        median = {key: statistics.median(run["summary"][key] for run in runs)
                  for key in ("throughput", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "itl_p99_ms")}
        same = sum(a == b for run, ref in zip(runs, full) for a, b in zip(run["texts"], ref["texts"]))
        table[name] = {**median, "same_text": same, "requests": sum(len(run["texts"]) for run in runs),
                       "output_tokens": runs[0]["summary"]["output_tokens"]}
    return {"rows": table, "load": os.getloadavg()[0]}


def ablation(quick: bool = False, rows: list[str] | None = None) -> dict:
    return ablation_table(ablate_rows(rows or list(ROWS), quick))


def tp2_error() -> str:
    """SmolLM2 切不成 2 份：启动器在起任何进程之前说明原因（这里直接调用同一个检查）。"""
    from minisgl.distributed import DistributedInfo
    from minisgl.engine import EngineConfig

    try:
        EngineConfig(model_path=smollm2(), tp_info=DistributedInfo(0, 2)).check_tp_split()
    except ValueError as e:
        return str(e)
    raise AssertionError("SmolLM2 应当切不成 2 份")


# ---------------------------------------------------------------------------- 同行（离线）


def peers(quick: bool = False) -> dict:
    """同一份 token id 负载：我们（全开）、HF generate、llama.cpp。每轮一个种子，参赛者轮流跑，取中位数。"""
    import torch

    from ch11_benchmark import Workload, hf_generate, load_hf_model
    from minisgl.llm import LLM

    torch.set_num_threads(THREADS)
    path = smollm2()
    spec = dict(WORKLOAD, num_requests=4) if quick else WORKLOAD
    rounds = 1 if quick else ROUNDS
    workloads = [random_workload(seed=seed, **spec) for seed in range(rounds)]
    llm = LLM(str(path), max_running_req=MAX_RUNNING, cuda_graph_max_bs=MAX_RUNNING)
    hf = load_hf_model(path)
    pad_id = load_tokenizer(path).eos_token_id
    cpp = None
    if llamacpp.available() is None:
        from llama_cpp import Llama

        cpp = {kind: Llama(model_path=str(gguf), n_ctx=1024, n_threads=THREADS, n_threads_batch=THREADS,
                           verbose=False) for kind, gguf in llamacpp.gguf_paths().items() if kind in LLAMACPP_KINDS}
    rates: dict[str, list[float]] = {}
    same: dict[str, int] = {}
    for work in workloads:
        _our_tokens(llm, random_workload(2, seed=1000 + len(rates), input_len=(8, 16), output_len=(4, 4)))  # 热身
        result = run_offline(llm, work)
        ours = result.outputs
        rates.setdefault(OURS, []).append(result.output_throughput)
        wl = Workload("消融的负载", [r.prompt_ids for r in work], [r.max_tokens for r in work])
        run = hf_generate(hf, wl, MAX_RUNNING, pad_id)
        rates.setdefault("HF generate（每 16 个一批）", []).append(wl.output_tokens / run.seconds)
        same["HF generate（每 16 个一批）"] = same.get("HF generate（每 16 个一批）", 0) + sum(
            a == b for a, b in zip(ours, run.outputs))
        for kind, model in (cpp or {}).items():
            start = time.perf_counter()
            outs = [_llamacpp_tokens(model, r.prompt_ids, r.max_tokens) for r in work]
            name = f"llama.cpp {kind}（一次一个请求）"
            rates.setdefault(name, []).append(wl.output_tokens / (time.perf_counter() - start))
            same[name] = same.get(name, 0) + sum(a == b for a, b in zip(ours, outs))
    llm.shutdown()
    return {"rates": {name: statistics.median(r) for name, r in rates.items()}, "same_as_ours": same,
            "requests": sum(map(len, workloads)), "output_tokens": sum(r.max_tokens for r in workloads[0]),
            "llamacpp": llamacpp.available(), "load": os.getloadavg()[0]}


def _our_tokens(llm, work) -> list[list[int]]:
    from minisgl.core import SamplingParams

    outs = llm.generate([r.prompt_ids for r in work],
                        [SamplingParams(max_tokens=r.max_tokens, ignore_eos=True) for r in work])
    return [o["token_ids"] for o in outs]


def _llamacpp_tokens(model, prompt: list[int], max_tokens: int) -> list[int]:
    ids = []
    for token in model.generate(prompt, temp=0.0, top_k=1, repeat_penalty=1.0, reset=True):
        ids.append(token)
        if len(ids) == max_tokens:
            return ids
    raise AssertionError("llama.cpp 的生成提前结束了")


def main() -> None:
    parser = argparse.ArgumentParser(description="第 21 章：消融表和同行对比")
    parser.add_argument("--quick", action="store_true", help="每个配置一轮、请求少")
    args = parser.parse_args()
    print(json.dumps({"ablation": ablation(args.quick), "peers": peers(args.quick), "tp2": tp2_error()},
                     ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
