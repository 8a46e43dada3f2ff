"""第 16 章的测量（不是测试）：CPU 上用 gloo 做张量并行，通信到底花多少时间、每个 rank 占多少内存。

三件事，都用真的进程（torch.multiprocessing 的 spawn，一个 rank 一个进程）在 127.0.0.1 上经 gloo 连成一组：

1. allreduce_latency：一次 all_reduce（以及 all_gather、broadcast）要多少微秒，载荷从 4 B 到 4 MiB；
2. decode_step_times：真引擎（LLM）在 TP=1/2/3 下每步 decode 多久，其中多少花在通信里、每次前向调用几次；
3. load_peak_memory：每个 rank 建好 Engine 之后的峰值内存，哪些是自己持有的权重（匿名页），哪些是读文件时
   映射进来的页（文件页）。

数字随机器和负载而变（开始、结束时都打印机器负载），比例和次数才有意义。

    python examples/ch16_comm.py --quick     # 一分钟以内
    python examples/ch16_comm.py             # 安静的 2 核机器上两三分钟

notebook 里可以单独调用每个函数，返回的都是普通的 dict / list，直接拿去画图：

    from examples.ch16_comm import allreduce_latency, decode_step_times, load_peak_memory
"""

from __future__ import annotations

import json
import math
import os
import queue
import socket
import statistics
import struct
import threading
import time
from collections import Counter
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from minibook import cli

# 载荷大小（字节），对数间隔；其中 256·4 B 是 tiny Qwen3 一个 token 的隐状态，576·4 B 是 SmolLM2 的
SIZES = (4, 16, 64, 256, 1024, 2304, 4096, 16384, 65536, 262144, 1048576, 4194304)
# all_gather、broadcast 只量几个大小：每个 rank 交出去的字节数
FEW_SIZES = (4, 2304, 65536, 1048576)


# ---------------------------------------------------------------------------- 小工具


def free_port() -> int:
    """向系统要一个此刻没人用的端口，给这一组进程会合用。"""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def machine_load() -> float:
    """1 分钟平均负载：接近核数时别的进程在抢 CPU，计时会偏大。"""
    return os.getloadavg()[0]


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def p90(xs: list[float]) -> float:
    """第 90 百分位（最近秩法）：十次里有一次比它慢。"""
    ordered = sorted(xs)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def _entry(rank: int, fn, world: int, results, args: tuple) -> None:
    results.put((rank, fn(rank, world, *args)))


def spawn(fn, world: int, *args) -> list:
    """起 world 个进程，第 r 个调用 fn(r, world, *args)；按 rank 顺序返回它们的返回值。

    用 spawn 而不是 fork：每个 rank 从一个干净的解释器开始，和真正的多卡部署一样。
    """
    results = mp.get_context("spawn").Queue()
    procs = mp.spawn(_entry, args=(fn, world, results, args), nprocs=world, join=False)
    got: dict[int, object] = {}
    while len(got) < world:
        try:
            rank, value = results.get(timeout=1)
            got[rank] = value
        except queue.Empty:
            procs.join(timeout=0)  # 有进程出错时在这里抛出它的异常
    while not procs.join():
        pass
    return [got[r] for r in range(world)]


def table(header: list[str], rows: list[list[str]]) -> str:
    """等宽的文字表格（中文字符按两格算）。第一列和表头为空的列（注释）左对齐，其余右对齐。"""
    widths = [max(cli.display_width(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(row: list[str]) -> str:
        cells = [cli.ljust(str(c), w) if i == 0 or not header[i] else " " * (w - cli.display_width(str(c))) + str(c)
                 for i, (c, w) in enumerate(zip(row, widths))]
        return "  ".join(cells).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


def human_bytes(n: float) -> str:
    for unit, size in (("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:g} {unit}" if (n / size).is_integer() else f"{n / size:.1f} {unit}"
    return f"{n:g} B"


# ---------------------------------------------------------------------------- 1. 集合通信的延迟


def _time_ops(ops: dict, repeats: int, warmup: int) -> dict:
    """给 {名字: 操作} 里的每个操作计时 repeats 次，返回 {名字: [微秒, ...]}。

    每个先预热几次；之后一轮一轮地量，每轮把所有操作各做一次：机器上别的进程时忙时闲，
    轮流量让每个操作都赶上差不多的忙闲，曲线的形状才可信。每次之前 barrier 一下，让各 rank 同时出发。
    """
    for op in ops.values():
        for _ in range(warmup):
            op()
    times: dict = {name: [] for name in ops}
    for _ in range(repeats):
        for name, op in ops.items():
            dist.barrier()
            started = time.perf_counter()
            op()
            times[name].append((time.perf_counter() - started) * 1e6)
    return times


def _latency_worker(rank: int, world: int, port: int, sizes: list[int], few: list[int],
                    repeats: int, warmup: int, threads: int) -> dict:
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    gather_into = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

    def all_reduce(x):
        return lambda: dist.all_reduce(x)

    def all_gather(x):
        out = x.new_empty(world * x.numel())
        return lambda: gather_into(out, x)

    def broadcast(x):
        return lambda: dist.broadcast(x, src=0)

    ops = {("all_reduce", size): all_reduce(torch.ones(size // 4)) for size in sizes}  # float32：4 字节一个
    for size in few:
        ops["all_gather", size] = all_gather(torch.ones(size // 4))
        ops["broadcast", size] = broadcast(torch.ones(size // 4))
    try:
        return _time_ops(ops, repeats, warmup)
    finally:
        dist.destroy_process_group()


def allreduce_latency(world: int, sizes: tuple[int, ...] = SIZES, repeats: int = 50, threads: int = 1,
                      few_sizes: tuple[int, ...] = FEW_SIZES, warmup: int = 5) -> dict:
    """world 个进程经 gloo 做集合通信，量每次多少微秒。

    各种操作、各个大小轮流量（见 _time_ops）；一次操作的耗时取最慢的那个 rank（它决定大家什么时候
    能往下走），再对 repeats 次取中位数和 p90。返回

        {"world", "threads", "repeats", "load_before", "load_after",
         "all_reduce": [{"bytes", "median_us", "p90_us", "min_us"}, ...],   # 每个 size 一行
         "all_gather": [...], "broadcast": [...]}                  # few_sizes 的每个一行
    """
    load_before = machine_load()
    per_rank = spawn(_latency_worker, world, free_port(), list(sizes), list(few_sizes), repeats, warmup,
                     threads)
    result = {"world": world, "threads": threads, "repeats": repeats, "load_before": load_before}
    for name in ("all_reduce", "all_gather", "broadcast"):
        rows = []
        for size in sizes if name == "all_reduce" else few_sizes:
            slowest = [max(times) for times in zip(*(r[name, size] for r in per_rank))]
            rows.append({"bytes": size, "median_us": median(slowest), "p90_us": p90(slowest),
                         "min_us": min(slowest)})
        result[name] = rows
    result["load_after"] = machine_load()
    return result


def latency_at(rows: list[dict], nbytes: int) -> float:
    """在量过的 (bytes, median_us) 之间按对数插值，估计 nbytes 这么大的载荷要多少微秒。"""
    pts = sorted((r["bytes"], r["median_us"]) for r in rows)
    if nbytes <= pts[0][0]:
        return pts[0][1]
    for (b0, t0), (b1, t1) in zip(pts, pts[1:]):
        if nbytes <= b1:
            w = math.log(nbytes / b0) / math.log(b1 / b0)
            return math.exp((1 - w) * math.log(t0) + w * math.log(t1))
    return pts[-1][1] * nbytes / pts[-1][0]  # 比量过的都大：按带宽线性外推


def _cell(row: dict) -> str:
    return f"{row['median_us']:.0f} / {row['p90_us']:.0f} / {row['min_us']:.0f}"


def print_latency(results: list[dict]) -> None:
    print(f"### 1. gloo 集合通信的延迟（127.0.0.1，每个进程 {results[0]['threads']} 个 torch 线程，"
          f"预热后量 {results[0]['repeats']} 次，每次取最慢的 rank）\n")
    header = ["载荷（float32）"] + [f"world={r['world']} 中位/p90/最快 (µs)" for r in results]
    notes = {1024: "← tiny Qwen3 一个 token", 2304: "← SmolLM2 一个 token",
             1048576: "← 70B 批 64 的 bf16 激活"}
    rows = []
    for i, row in enumerate(results[0]["all_reduce"]):
        cells = [_cell(r["all_reduce"][i]) for r in results]
        rows.append([human_bytes(row["bytes"]), *cells, notes.get(row["bytes"], "")])
    print("all_reduce：")
    print(table(header + [""], rows))
    for name in ("all_gather", "broadcast"):
        rows = []
        for i, row in enumerate(results[0][name]):
            cells = [_cell(r[name][i]) for r in results]
            rows.append([human_bytes(row["bytes"]) + ("（每个 rank）" if name == "all_gather" else ""), *cells])
        print(f"\n{name}：")
        print(table(header, rows))
    loads = "，".join(f"world={r['world']} 前 {r['load_before']:.2f} 后 {r['load_after']:.2f}" for r in results)
    print(f"\n机器负载（1 分钟平均，{os.cpu_count()} 个核）：{loads}")
    print("最快的一次接近机器空闲时的样子；中位数、p90 比它大得多时，是别的进程在抢核："
          "某个 rank 要等轮到它上 CPU 才能收发")
    crowded = [str(r["world"]) for r in results if r["world"] > (os.cpu_count() or 1)]
    if crowded:
        print(f"world={'、'.join(crowded)} 的进程比核多：一次集合通信要等轮到每个 rank 上 CPU，慢得不成比例")
    print()


# ---------------------------------------------------------------------------- 2. 真引擎里的通信


def _comm_meter_class():
    from minisgl.distributed import DistributedImpl

    class CommMeter(DistributedImpl):
        """包住原来那个通信实现：照常转发，同时数每种集合通信调用了几次、一共花了多少秒。

        层只认 DistributedCommunicator.plugins[-1]，所以把它追加到 plugins 末尾就接管了全部通信，
        层的代码一行不改（和换成更快的通信库是同一个口子）。
        """

        def __init__(self, inner: DistributedImpl) -> None:
            self.inner = inner
            self.calls: Counter[str] = Counter()
            self.seconds: Counter[str] = Counter()

        def _timed(self, name: str, fn, *args):
            started = time.perf_counter()
            try:
                return fn(*args)
            finally:
                self.seconds[name] += time.perf_counter() - started
                self.calls[name] += 1

        def all_reduce(self, x):
            return self._timed("all_reduce", self.inner.all_reduce, x)

        def all_gather(self, x):
            return self._timed("all_gather", self.inner.all_gather, x)

        def broadcast(self, x, src=0):
            return self._timed("broadcast", self.inner.broadcast, x, src)

    return CommMeter


COMM_OPS = ("all_reduce", "all_gather", "broadcast")


def _decode_worker(rank: int, world: int, path: str, port: int, batch_sizes: list[int], steps: int,
                   threads: int | None, prompt_len: int, skip: int) -> dict:
    # 不重叠：每一步当场算完自己的前向，前向的计时才干净（重叠时前向在工作线程上，和下一步的调度交错）
    os.environ["MINISGL_DISABLE_OVERLAP_SCHEDULING"] = "1"
    os.environ.setdefault("MINISGL_LOG_LEVEL", "WARNING")
    if threads is not None:
        torch.set_num_threads(threads)
    from minisgl.core import SamplingParams
    from minisgl.distributed import DistributedCommunicator, DistributedInfo
    from minisgl.llm import LLM

    biggest, max_len = max(batch_sizes), prompt_len + steps + skip + 2
    llm = LLM(path, tp_info=DistributedInfo(rank, world), distributed_port=port,
              max_running_req=biggest, max_seq_len_override=max_len,
              num_page_override=2 * biggest * max_len)
    meter = _comm_meter_class()(DistributedCommunicator.plugins[-1])
    DistributedCommunicator.plugins.append(meter)

    log: list[dict] = []  # 每一次前向：是不是 decode、批大小、前向秒数、通信秒数与次数
    forward_batch = llm.engine.forward_batch

    def timed_forward(batch, args):
        calls, seconds = meter.calls.copy(), meter.seconds.copy()
        started = time.perf_counter()
        out = forward_batch(batch, args)  # 不重叠：前向、通信、采样都在这里当场做完
        log.append({"decode": not batch.is_prefill, "size": batch.size,
                    "forward": time.perf_counter() - started,
                    "comm": sum(meter.seconds.values()) - sum(seconds.values()),
                    "calls": {op: meter.calls[op] - calls[op] for op in COMM_OPS}})
        return out

    step = llm.step

    def timed_step():
        count = len(log)
        started = time.perf_counter()
        out = step()
        if len(log) > count:  # 这一步发出了一次前向：整步时间记在它名下（含调度、记账）
            log[-1]["step"] = time.perf_counter() - started
        return out

    llm.engine.forward_batch, llm.step = timed_forward, timed_step
    vocab = llm.engine.model_config.vocab_size
    rows = []
    try:
        gen = torch.Generator().manual_seed(0)  # 各 rank 同一个种子：提示一模一样
        llm.generate([torch.randint(100, vocab, (prompt_len,), generator=gen).tolist()],
                     SamplingParams(max_tokens=3, ignore_eos=True))  # 预热
        for b in batch_sizes:
            prompts = [torch.randint(100, vocab, (prompt_len,), generator=gen).tolist() for _ in range(b)]
            log.clear()
            llm.generate(prompts, SamplingParams(max_tokens=steps + skip + 1, ignore_eos=True))
            decode = [r for r in log if r["decode"] and r["size"] == b][skip:]  # 前 skip 步当预热
            rows.append({
                "batch": b, "steps": len(decode),
                "step_ms": [r["step"] * 1e3 for r in decode],
                "forward_ms": [r["forward"] * 1e3 for r in decode],
                "comm_ms": [r["comm"] * 1e3 for r in decode],
                "calls": decode[-1]["calls"],
            })
    finally:
        DistributedCommunicator.plugins.remove(meter)
        llm.shutdown()
    return {"rank": rank, "threads": torch.get_num_threads(), "rows": rows}


def decode_step_times(model_path: str | Path, tp_sizes: list[int], batch_sizes: tuple[int, ...] = (1, 8),
                      steps: int = 16, threads_per_rank: int | None = None, prompt_len: int = 16,
                      skip: int = 2) -> list[dict]:
    """真引擎（LLM.generate，贪心）在每个 TP 下每步 decode 的时间，以及其中通信占的份额。

    每个 rank 一个进程，都拿同样的提示调用 generate（离线 TP 就是这样跑的）；不重叠调度。
    threads_per_rank=None 时用引擎自己的规矩（TP>1 时每个 rank 用 核数 ÷ 本机 rank 数 个线程，至少 1 个）。
    通信时间包括等别的 rank 赶上来的时间：CPU 上各 rank 算得快慢不一，快的在 all_reduce 里等慢的。
    返回每个 (tp, batch) 一行：

        {"tp", "batch", "steps", "threads": [各 rank 的线程数],
         "step_ms", "step_p90_ms", "forward_ms", "comm_ms",          # rank 0 的中位数
         "comm_share": [各 rank 的 通信总时间 / 前向总时间],
         "calls_per_forward": {"all_reduce": ..., "all_gather": ..., "broadcast": ...}}
    """
    out = []
    for tp in tp_sizes:
        per_rank = spawn(_decode_worker, tp, str(model_path), free_port(), list(batch_sizes), steps,
                         threads_per_rank, prompt_len, skip)
        for i, b in enumerate(batch_sizes):
            mine = per_rank[0]["rows"][i]
            out.append({
                "tp": tp, "batch": b, "steps": mine["steps"],
                "threads": [r["threads"] for r in per_rank],
                "step_ms": median(mine["step_ms"]), "step_p90_ms": p90(mine["step_ms"]),
                "forward_ms": median(mine["forward_ms"]), "comm_ms": median(mine["comm_ms"]),
                "comm_share": [sum(r["rows"][i]["comm_ms"]) / sum(r["rows"][i]["forward_ms"]) for r in per_rank],
                "calls_per_forward": mine["calls"],
            })
    return out


def print_decode(name: str, rows: list[dict], num_layers: int) -> None:
    print(f"{name}（{num_layers} 层；预期每次前向 all_reduce {2 * num_layers} + 1 = {2 * num_layers + 1} 次、"
          f"all_gather 1 次；贪心采样不 broadcast）：")
    header = ["TP", "批", "每 rank 线程", "每步 中位/p90 (ms)", "前向 (ms)", "通信 (ms)", "通信占前向",
              "all_reduce/all_gather 每次前向"]
    body = []
    base: dict[int, float] = {}  # 同批大小第一行 TP=1 的每步时间
    for r in rows:
        if r["tp"] == 1:
            base.setdefault(r["batch"], r["step_ms"])
    for r in rows:
        shares = r["comm_share"]
        share = f"{shares[0]:.0%}" if len(shares) == 1 else \
            f"{shares[0]:.0%}（各 rank {min(shares):.0%}–{max(shares):.0%}）"
        vs = f"（×{r['step_ms'] / base[r['batch']]:.2f}）" if r["step_ms"] != base.get(r["batch"]) else ""
        calls = r["calls_per_forward"]
        body.append([str(r["tp"]), str(r["batch"]), "/".join(map(str, r["threads"])),
                     f"{r['step_ms']:.1f} / {r['step_p90_ms']:.1f}{vs}", f"{r['forward_ms']:.1f}",
                     f"{r['comm_ms']:.1f}", share, f"{calls['all_reduce']} / {calls['all_gather']}"])
    print(table(header, body))
    print(f"（rank 0 的数字，每组 {rows[0]['steps']} 步 decode；（×k）是相对同批大小第一行 TP=1 的倍数。"
          f"通信时间包括在 all_reduce 里等别的 rank 算完的时间）\n")


# ---------------------------------------------------------------------------- 3. 加载权重的内存


def proc_status() -> dict[str, int]:
    """/proc/self/status 里的几项内存（字节）：VmRSS 常驻、VmHWM 常驻的峰值、
    RssAnon 匿名页（进程自己分配的：权重张量、KV 池）、RssFile 文件页（映射进来的文件：库、safetensors）。"""
    wanted = ("VmRSS", "VmHWM", "RssAnon", "RssFile")
    out = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in wanted:
                out[key] = int(value.split()[0]) * 1024
    return out


class RssSampler:
    """后台线程每隔几毫秒读一次 /proc/self/status，记下 RssAnon、RssFile 各自的最大值。

    VmHWM 只给出两者之和的峰值；读文件的映射在加载完就解除了，事后再看已经看不到它占过多少。
    """

    def __init__(self, interval: float = 0.002) -> None:
        self.interval, self.peak = interval, Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for key, value in proc_status().items():
                self.peak[key] = max(self.peak[key], value)
            time.sleep(self.interval)

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def file_tensor_bytes(model_path: str | Path) -> int:
    """safetensors 文件里全部张量的字节数：读文件头（8 字节长度 + JSON），不读数据。"""
    total = 0
    for file in sorted(Path(model_path).glob("*.safetensors")):
        with open(file, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(length))
        total += sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in header.items()
                     if k != "__metadata__")
    return total


def _memory_worker(rank: int, world: int, path: str, port: int) -> dict:
    os.environ.setdefault("MINISGL_LOG_LEVEL", "WARNING")
    from minisgl.distributed import DistributedInfo
    from minisgl.engine import Engine, EngineConfig

    config = EngineConfig(path, tp_info=DistributedInfo(rank, world), distributed_port=port,
                          max_running_req=1, num_page_override=16, max_seq_len_override=16)
    before = proc_status()
    with RssSampler() as sampler:
        engine = Engine(config)
    after = proc_status()
    weights = sum(t.numel() * t.element_size() for t in engine.model.state_dict().values())
    engine.shutdown()
    return {"rank": rank, "before": before, "after": after, "sampled_peak": dict(sampler.peak),
            "weight_bytes": weights}


def load_peak_memory(model_path: str | Path, tp_size: int) -> list[dict]:
    """tp_size 个 rank 各自建一个 Engine（KV 池只有 16 页），量建之前、建之后的内存。每个 rank 一行：

        {"rank", "weight_bytes",                  # 本 rank 模型里全部权重张量的字节数
         "before": {"VmRSS", "VmHWM", "RssAnon", "RssFile"},   # 建 Engine 之前（torch 已导入）
         "after":  {...},                                        # 建好之后
         "sampled_peak": {...}}                                  # 建的过程中每 2 ms 采样的最大值
    """
    return spawn(_memory_worker, tp_size, str(model_path), free_port())


def print_memory(model_path: Path, runs: dict[int, list[dict]]) -> None:
    full = file_tensor_bytes(model_path)
    mib = 2**20
    print(f"### 3. 每个 rank 建 Engine 时的内存（{model_path.name}，文件里全部张量 {full / mib:.0f} MiB，float32）\n")
    header = ["TP / rank", "本 rank 权重", "RssAnon 增量", "峰值 RssFile 增量", "VmHWM", "VmHWM 增量",
              "建之前 VmRSS"]
    body = []
    for tp, ranks in runs.items():
        for r in ranks:
            b, a, s = r["before"], r["after"], r["sampled_peak"]
            body.append([f"TP={tp} rank {r['rank']}", f"{r['weight_bytes'] / mib:.0f} MiB",
                         f"{(a['RssAnon'] - b['RssAnon']) / mib:.0f} MiB",
                         f"{(s['RssFile'] - b['RssFile']) / mib:.0f} MiB",
                         f"{a['VmHWM'] / mib:.0f} MiB", f"{(a['VmHWM'] - b['VmRSS']) / mib:.0f} MiB",
                         f"{b['VmRSS'] / mib:.0f} MiB"])
    print(table(header, body))
    print("RssAnon 是进程自己分配的内存（切好的权重张量、KV 池）；RssFile 是 safetensors 读的时候映射进来、"
          "被摸到的文件页，加载完映射就解除了，所以只能在加载过程中采样（每 2 ms 一次）。"
          "VmHWM 是常驻内存（两者之和）的峰值。文件页是几个 rank 共用的页缓存；TP>1 时每个 rank 摸到的"
          "文件页多于 1/TP：按输入维切的 o_proj、down_proj 每一行都要读一段，整块矩阵的页都被摸到。\n")


# ---------------------------------------------------------------------------- 4. 书里的练习


def print_exercise(latency: dict[int, dict]) -> None:
    """Llama-3.1-70B，TP=8，decode 批 64，bf16：每次 all_reduce 多少字节、NVLink 上要多久、gloo 上要多久。"""
    hidden, batch, n, layers, nvlink = 8192, 64, 8, 80, 450e9
    nbytes = batch * hidden * 2  # bf16 两个字节
    ring = 2 * (n - 1) / n * nbytes  # ring all-reduce：每个 rank 发出（也收到）这么多
    count = 2 * layers
    per = ring / nvlink
    print("### 4. 练习：Llama-3.1-70B，TP=8，decode 批 64，bf16\n")
    print(f"每次 all_reduce 的载荷 64 × 8192 × 2 B = {nbytes:,} B（{human_bytes(nbytes)}）；"
          f"ring 每个 rank 发送 2 × (8−1)/8 × 载荷 = {ring:,.0f} B")
    print(f"NVLink 450 GB/s：一次 {per * 1e6:.2f} µs 的带宽时间，每步 {count} 次 = {count * per * 1e3:.2f} ms"
          "（还没算每次几微秒的固定延迟）")
    for world, res in latency.items():
        t = latency_at(res["all_reduce"], nbytes)
        print(f"同样 {count} 次放到本机 gloo（{world} 个 rank，量到 {human_bytes(nbytes)} 一次 {t:.0f} µs）："
              f"每步 {count * t / 1e3:.0f} ms，是 NVLink 估计的 {t / (per * 1e6):.0f} 倍")
    print()


# ---------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None):
    parser = cli.ArgumentParser(
        prog="python examples/ch16_comm.py",
        description="gloo 上集合通信的延迟、TP 下每步 decode 里通信的份额、每个 rank 加载权重的内存",
        epilog="示例：\n  python examples/ch16_comm.py --quick\n  python examples/ch16_comm.py --repeats 100")
    parser.add_argument("--quick", action="store_true", help="小规模快速跑一遍（一分钟以内）")
    parser.add_argument("--repeats", type=int, default=None, metavar="N",
                        help="每个载荷计时几次（默认 50，--quick 时 20）")
    parser.add_argument("--steps", type=int, default=None, metavar="N",
                        help="每组量几步 decode（默认 16，--quick 时 4）")
    args = parser.parse_args(argv)
    args.repeats = args.repeats or (20 if args.quick else 50)
    args.steps = args.steps or (4 if args.quick else 16)
    args.skip = 1 if args.quick else 2  # 每组先跑几步 decode 当预热、不计
    if args.repeats < 1 or args.steps < 1:
        parser.error("--repeats 和 --steps 都必须 ≥ 1")
    return args


def main(argv: list[str] | None = None) -> int:
    from minibook.models import smollm2, tiny_qwen3
    from minisgl.models import ModelConfig

    args = parse_args(argv)
    started = time.perf_counter()
    print(f"开始时机器负载 {machine_load():.2f}（1 分钟平均，{os.cpu_count()} 个核）；"
          f"torch {torch.__version__}，gloo，127.0.0.1\n")

    sizes = SIZES if not args.quick else (4, 1024, 2304, 16384, 65536, 1048576, 4194304)
    few = FEW_SIZES if not args.quick else (2304, 65536)
    latency = {w: allreduce_latency(w, sizes, args.repeats, threads=1, few_sizes=few) for w in (2, 3)}
    print_latency(list(latency.values()))

    print(f"### 2. 真引擎每步 decode（不重叠调度；每组 {args.steps} 步，先跑 {args.skip} 步当预热）\n")
    for name, path, tp in (("tiny Qwen3", tiny_qwen3(), 2), ("SmolLM2-135M", smollm2(), 3)):
        # TP=1 用引擎默认的线程数（用满所有核）；不加 --quick 时再跑一次只用 1 个线程的
        # （TP>1 时每个 rank 也只有 1 个线程）
        rows = decode_step_times(path, [1], [1, 8], steps=args.steps, skip=args.skip)
        if not args.quick:
            rows += decode_step_times(path, [1], [1, 8], steps=args.steps, skip=args.skip, threads_per_rank=1)
        rows += decode_step_times(path, [tp], [1, 8], steps=args.steps, skip=args.skip)
        print_decode(name, rows, ModelConfig.from_json(path).num_layers)
    print(f"机器负载 {machine_load():.2f}\n")

    path = smollm2()
    print_memory(path, {tp: load_peak_memory(path, tp) for tp in (1, 3)})

    print_exercise(latency)
    print(f"结束时机器负载 {machine_load():.2f}；共用 {time.perf_counter() - started:.0f} 秒")
    return 0


if __name__ == "__main__":
    cli.run(main)
