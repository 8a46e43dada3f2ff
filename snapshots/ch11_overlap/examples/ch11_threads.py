"""线程数和重叠调度怎么选（测量，不是测试）：同一次运行里比 HF、重叠开/关、1/2 个 torch 线程，
机器空着和被别的进程占满两种情形。

每种配置量两样：批大小 1 的 decode（token/s）和 32 个混合请求的离线吞吐（有用 token/s）。
“占满”用 NUM_CORES 个子进程各自死循环做小矩阵乘（单线程），代表同一台机器上别人的活。
每个格子跑 REPEATS 遍取中位数，配置轮流跑，负载的起伏摊到每一格上。

    python examples/ch11_threads.py                 # 安静的 2 核机器上约 20 分钟
    python examples/ch11_threads.py --quick         # 一遍，小一点
    python examples/ch11_threads.py --wait-policy   # 只比 OpenMP 等待策略：默认 vs PASSIVE，机器占满时

--wait-policy 每格起一个新的解释器：OpenMP 只在 torch 导入时读一次 OMP_WAIT_POLICY，
“默认”那一格先导入 torch 再导入 minisgl（minisgl 就不设它），PASSIVE 那一格先导入 minisgl。
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import statistics
import subprocess
import sys
import time

import minisgl  # 先于 torch 导入：minisgl 在这之前设好 OMP_WAIT_POLICY 的默认值（见 minisgl/__init__.py）
import torch

from ch11_benchmark import load_hf_model
from minibook.hf import quiet_transformers
from minibook.models import default_model
from minisgl.core import SamplingParams
from minisgl.llm import LLM


def busy(stop) -> None:  # 别人的活：单线程小矩阵乘，一直占着一个核
    torch.set_num_threads(1)
    a = torch.randn(256, 256)
    while not stop.is_set():
        a = (a @ a).tanh_()


def mixed(n: int, seed: int = 0) -> tuple[list[list[int]], list[int]]:
    rng = random.Random(seed)
    prompts = [[rng.randrange(1000, 20000) for _ in range(rng.randint(16, 128))] for _ in range(n)]
    return prompts, [rng.randint(16, 64) for _ in range(n)]


def run_ours(path, overlap: bool, prompts, max_tokens) -> float:
    os.environ["MINISGL_DISABLE_OVERLAP_SCHEDULING"] = "0" if overlap else "1"
    llm = LLM(path, max_running_req=max(len(prompts), 1), max_seq_len_override=256)
    assert llm.overlap == overlap
    llm.generate([prompts[0][:8]], SamplingParams(max_tokens=2, ignore_eos=True))  # 预热
    start = time.perf_counter()
    llm.generate(prompts, [SamplingParams(max_tokens=m, ignore_eos=True) for m in max_tokens])
    seconds = time.perf_counter() - start
    llm.shutdown()
    return sum(max_tokens) / seconds


def run_hf(model, prompts, max_tokens) -> float:
    start = time.perf_counter()
    with quiet_transformers(), torch.inference_mode():
        for p, m in zip(prompts, max_tokens):  # 批大小 1 才和 HF 的用法一致；混合负载只比我们自己
            ids = torch.tensor([p])
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=m, min_new_tokens=m,
                           do_sample=False, pad_token_id=0)
    return sum(max_tokens) / (time.perf_counter() - start)


def decode_one(path, overlap: bool, tokens: int) -> float:
    prompts, max_tokens = [[1000 + i for i in range(64)]], [tokens]
    return run_ours(path, overlap, prompts, max_tokens)


CELL = """
import sys
if sys.argv[1] == "default":
    import torch  # 先导入 torch：minisgl 看到 torch 已经在了，不设 OMP_WAIT_POLICY
import os, minisgl, torch
sys.path.insert(0, "examples")
from ch11_threads import decode_one
from minibook.models import default_model
torch.set_num_threads(int(sys.argv[2]))
print(os.environ.get("OMP_WAIT_POLICY", "（没设）"), decode_one(default_model(), sys.argv[3] == "on", int(sys.argv[4])))
"""


def wait_policy(repeats: int, tokens: int) -> None:
    """机器被 NUM_CORES 个忙进程占满时，2 个线程的批大小 1 decode：OpenMP 默认的等待 vs PASSIVE。"""
    cores = os.cpu_count()
    print(f"{cores} 个核，被 {cores} 个单线程的忙进程占满；{cores} 个 torch 线程，批大小 1 decode {tokens} 个 token，"
          f"每格 {repeats} 遍的中位数；开始时 1 分钟平均负载 {os.getloadavg()[0]:.1f}")
    stop = mp.Event()
    hogs = [mp.Process(target=busy, args=(stop,), daemon=True) for _ in range(cores)]
    for h in hogs:
        h.start()
    cells: dict[tuple[str, str], list[float]] = {}
    shown: dict[str, str] = {}
    for _ in range(repeats):  # 轮流跑，负载的起伏摊到每一格上
        for policy in ("default", "passive"):
            for overlap in ("off", "on"):
                env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
                out = subprocess.run([sys.executable, "-c", CELL, policy, str(cores), overlap, str(tokens)],
                                     env=env, capture_output=True, text=True, check=True).stdout.split()
                shown[policy] = out[0]
                cells.setdefault((policy, overlap), []).append(float(out[1]))
    stop.set()
    for h in hogs:
        h.join()
    print("\n| OMP_WAIT_POLICY | 重叠关 | 重叠开 |\n|---|---|---|")
    for policy in ("default", "passive"):
        off, on = (statistics.median(cells[(policy, o)]) for o in ("off", "on"))
        print(f"| {shown[policy]} | {off:.1f} | {on:.1f} |")
    print(f"\n（token/s；结束时 1 分钟平均负载 {os.getloadavg()[0]:.1f}，占满用的 {cores} 个进程也算在内）")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python examples/ch11_threads.py",
                                     description="线程数 × 重叠调度 × 机器负载，批大小 1 和 32 个请求的吞吐")
    parser.add_argument("--quick", action="store_true", help="每格一遍，请求少一些")
    parser.add_argument("--wait-policy", action="store_true",
                        help="只比 OpenMP 的等待策略（默认 vs PASSIVE），机器被占满时，每格一个新进程")
    args = parser.parse_args()
    repeats = 1 if args.quick else 3
    if args.wait_policy:
        wait_policy(repeats, 24 if args.quick else 32)
        return
    path = default_model()
    hf = load_hf_model(path)
    single = ([[1000 + i for i in range(64)]], [24 if args.quick else 48])
    batch = mixed(16 if args.quick else 32)
    cores = os.cpu_count()
    print(f"模型 {path.name}，float32，{cores} 个核；OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '（没设）')}；"
          f"每格 {repeats} 遍的中位数；"
          f"开始时 1 分钟平均负载 {os.getloadavg()[0]:.1f}")
    rows = []
    for loaded in (False, True):
        stop = mp.Event()
        hogs = [mp.Process(target=busy, args=(stop,), daemon=True) for _ in range(cores if loaded else 0)]
        for h in hogs:
            h.start()
        for threads in sorted({1, cores}):
            torch.set_num_threads(threads)
            cells: dict[str, list[float]] = {k: [] for k in ("HF 1", "关 1", "开 1", "关 32", "开 32")}
            for _ in range(repeats):
                cells["HF 1"].append(run_hf(hf, *single))
                for overlap, name in ((False, "关"), (True, "开")):
                    cells[f"{name} 1"].append(run_ours(path, overlap, *single))
                    cells[f"{name} 32"].append(run_ours(path, overlap, *batch))
            rows.append((loaded, threads, {k: statistics.median(v) for k, v in cells.items()}))
            print(f"  量完：{'占满' if loaded else '空着'}、{threads} 个线程", flush=True)
        stop.set()
        for h in hogs:
            h.join()
    print(f"\n| 机器 | torch 线程 | HF 批 1 | 重叠关 批 1 | 重叠开 批 1 | 关/HF | 重叠关 {len(batch[0])} 个 | 重叠开 {len(batch[0])} 个 |")
    print("|---|---|---|---|---|---|---|---|")
    for loaded, threads, c in rows:
        print(f"| {'被 %d 个进程占满' % cores if loaded else '空着'} | {threads} | {c['HF 1']:.1f} | {c['关 1']:.1f} | "
              f"{c['开 1']:.1f} | {c['关 1'] / c['HF 1']:.2f} | {c['关 32']:.1f} | {c['开 32']:.1f} |")
    print(f"\n（token/s；结束时 1 分钟平均负载 {os.getloadavg()[0]:.1f}，其中占满那几格自己的 {cores} 个进程也算在内）")


if __name__ == "__main__":
    main()
