"""阶段二的基准测试（不是测试）：离线吞吐，LLM.generate 对 Hugging Face generate，同一次运行里比。

工作负载是用户手里常见的那种：N 个请求，提示长度和 max_tokens 各在一个区间里随机抽（种子固定）。
两边都是贪心、都不在 EOS 处停，所以要算的活一样多；吞吐 = 每个请求要的 token 数之和 / 墙钟时间。
HF 那边照用户平常的写法：按顺序每 B 个请求一批，左填充、给 attention_mask，每批生成到这批最大的
max_tokens；我们这边把全部请求交给 LLM.generate，同时最多跑 B 个（max_running_req = B）。
B 取几个值（默认 16 和 64），每个值两边各跑一次，比值总是对同一个 B 的 HF。
另有一个共享前缀的变体：每个提示都以同一段“系统提示”开头（Radix Cache 该派上用场的地方）。

同一次运行里还量一次内存带宽（对一个大张量求和），给出批大小 1 时 decode 速度的上界：
每步 decode 至少要把全部权重和这个请求的 KV 从内存读一遍。数字取决于机器，比值才有意义。

    python examples/ch11_benchmark.py --quick          # 小规模，一两分钟
    python examples/ch11_benchmark.py --cuda-graph-max-bs 64   # 第 18 章起：decode 编译到批大小 64
    python examples/ch11_benchmark.py                   # 64 个请求，安静的 2 核机器上十来分钟
    MINISGL_DISABLE_OVERLAP_SCHEDULING=1 python examples/ch11_benchmark.py --profile   # 时间花在哪些算子上
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from minibook import cli
from minisgl.core import SamplingParams


# ---------------------------------------------------------------------------- 工作负载


@dataclass
class Workload:
    name: str
    prompts: list[list[int]]
    max_tokens: list[int]

    @property
    def output_tokens(self) -> int:
        """两边都要生成的 token 总数（每个请求正好 max_tokens 个）。"""
        return sum(self.max_tokens)

    @property
    def prompt_tokens(self) -> int:
        return sum(map(len, self.prompts))


FIRST_PLAIN_ID = 100  # 随机 token 从这里往上取：避开词表开头的特殊 token（SmolLM2 的 <|im_end|> 等）


def mixed_workload(n: int, prompt_len: tuple[int, int], max_tokens: tuple[int, int], vocab: int,
                   seed: int, prefix_len: int = 0) -> Workload:
    """n 个请求：提示长度、max_tokens 在闭区间里均匀抽取，token 随机；种子固定，结果可复现。

    prefix_len > 0 时，每个提示前面接同一段 prefix_len 个 token 的“系统提示”，
    提示长度区间说的是系统提示后面那一段。
    """
    gen = torch.Generator().manual_seed(seed)

    def draw(lo: int, hi: int) -> int:
        return int(torch.randint(lo, hi + 1, (1,), generator=gen))

    def tokens(k: int) -> list[int]:
        return torch.randint(FIRST_PLAIN_ID, vocab, (k,), generator=gen).tolist()

    prefix = tokens(prefix_len)
    prompts = [prefix + tokens(draw(*prompt_len)) for _ in range(n)]
    budgets = [draw(*max_tokens) for _ in range(n)]
    name = f"共享前缀（{prefix_len} token 的系统提示）" if prefix_len else "混合负载"
    return Workload(name, prompts, budgets)


# ---------------------------------------------------------------------------- Hugging Face 一侧


def load_hf_model(path: Path):
    from transformers import AutoModelForCausalLM, GenerationConfig

    from minibook.hf import quiet_transformers

    with quiet_transformers():
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    # 模型自带的生成配置里有 eos：换成空的，EOS 才不会让 HF 提前停（我们这边也 ignore_eos）
    model.generation_config = GenerationConfig()
    return model


def left_pad(prompts: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """左填充到这批最长的提示：新 token 接在每行的最右边。返回 (input_ids, attention_mask)。"""
    width = max(map(len, prompts))
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    return ids, mask


@dataclass
class HFRun:
    seconds: float
    cpu_seconds: float  # 这个进程用掉的 CPU 时间（所有线程合计）：机器上别人的负载影响它不大
    outputs: list[list[int]]
    computed_tokens: int  # 连填充、陪跑一起，HF 实际算过的 token 数（提示 + 生成）


def hf_generate(model, workload: Workload, batch_size: int, pad_id: int) -> HFRun:
    """用户平常的写法：按顺序每 batch_size 个一批，左填充，每批生成到这批最大的 max_tokens。"""
    from transformers import GenerationConfig

    from minibook.hf import quiet_transformers

    outputs: list[list[int]] = []
    computed = 0
    started, cpu_started = time.perf_counter(), time.process_time()
    for lo in range(0, len(workload.prompts), batch_size):
        prompts = workload.prompts[lo:lo + batch_size]
        budgets = workload.max_tokens[lo:lo + batch_size]
        ids, mask = left_pad(prompts, pad_id)
        steps = max(budgets)
        config = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=steps,
                                  min_new_tokens=steps, eos_token_id=None, pad_token_id=pad_id)
        with quiet_transformers(), torch.inference_mode():
            out = model.generate(ids, attention_mask=mask, generation_config=config)
        new = out[:, ids.shape[1]:]
        assert new.shape[1] == steps, (new.shape, steps)
        outputs += [row[:n].tolist() for row, n in zip(new, budgets)]  # 每个请求只要它的 max_tokens 个
        computed += ids.numel() + len(prompts) * (steps - 1)
    return HFRun(time.perf_counter() - started, time.process_time() - cpu_started, outputs, computed)


# ---------------------------------------------------------------------------- 我们这一侧


@dataclass
class OurRun:
    seconds: float
    cpu_seconds: float
    outputs: list[list[int]]
    steps: list["Step"]  # 每一次 Engine.forward_batch

    def forward(self, prefill: bool) -> tuple[float, float, int]:
        """prefill（或 decode）前向合计：(墙钟秒, CPU 秒, 步数)。"""
        chosen = [s for s in self.steps if s.is_prefill == prefill]
        return sum(s.seconds for s in chosen), sum(s.cpu_seconds for s in chosen), len(chosen)


@dataclass
class Step:
    is_prefill: bool
    batch_size: int
    seconds: float  # 墙钟
    cpu_seconds: float  # 跑前向的那个线程用掉的 CPU 时间（torch 单线程时，算子都在这个线程上）


def compute_method(engine) -> str:
    """Engine 上真正做前向计算的方法。第 11 章起 forward_batch 在 CPU 上只是把前向交给工作线程
    就返回，计算在 _forward_and_sample 里（工作线程上）；之前的章节 forward_batch 自己就算完。"""
    return "_forward_and_sample" if hasattr(type(engine), "_forward_and_sample") else "forward_batch"


def timed_forward(engine, log: list[Step]):
    """包一层做前向计算的方法：记下每一步是不是 prefill、批里几个请求、算了多久。

    CPU 时间按整个进程在这一步里用掉的算：前向的矩阵乘分给 OpenMP 的几个线程去做，只量计算所在的
    那个线程会漏掉它们。重叠调度时调度器线程和前向同时在跑，它那零点几毫秒也算在这里面。"""
    method = getattr(type(engine), compute_method(engine))

    def wrapper(batch, *args, **kwargs):
        started, cpu_started = time.perf_counter(), time.process_time()
        out = method(engine, batch, *args, **kwargs)
        log.append(Step(batch.is_prefill, len(batch.reqs), time.perf_counter() - started,
                        time.process_time() - cpu_started))
        return out

    return wrapper


def our_generate(llm, workload: Workload) -> OurRun:
    params = [SamplingParams(max_tokens=n, ignore_eos=True) for n in workload.max_tokens]
    log: list[Step] = []
    name = compute_method(llm.engine)
    setattr(llm.engine, name, timed_forward(llm.engine, log))
    try:
        started, cpu_started = time.perf_counter(), time.process_time()
        results = llm.generate(workload.prompts, params)
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    finally:
        delattr(llm.engine, name)  # 恢复类上的方法
    return OurRun(seconds, cpu_seconds, [list(r["token_ids"]) for r in results], log)


def make_llm(path: Path, workloads: list[Workload], max_running: int, cache_type: str | None, **fields):
    """LLM 的大小按工作负载定：页表 max_running 行；KV 池放得下同时在跑的 max_running 个最长请求，
    所以接纳只受 max_running_req 限制，不会因为页不够而等。fields：命令行给的其他 LLM 设置。"""
    from minisgl.llm import LLM

    longest = max(len(p) + n for w in workloads for p, n in zip(w.prompts, w.max_tokens))
    kwargs = dict(max_running_req=max_running, max_seq_len_override=longest,
                  num_page_override=max_running * longest + longest, **fields)
    if cache_type is not None:
        kwargs["cache_type"] = cache_type
    return LLM(str(path), **kwargs)


def cache_types() -> list[str | None]:
    """这棵树里有哪些前缀缓存可比：第 9 章起有 radix（默认），同时也比 naive；之前只有默认那一种。"""
    if importlib.util.find_spec("minisgl.kvcache.radix_cache") is not None:
        return ["naive", "radix"]
    return [None]


# ---------------------------------------------------------------------------- 内存带宽与批大小 1 的上界


def read_bandwidth(megabytes: int = 512, repeats: int = 5) -> float:
    """对一个大张量求和：每个字节从内存读一次。返回字节/秒（取最快的一次；线程数与基准相同）。"""
    x = torch.ones(megabytes * 2**20 // 4, dtype=torch.float32)
    x.sum()  # 预热：页第一次被碰到时才真正分配
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - started)
    return x.numel() * x.element_size() / best


def weight_bytes(model) -> int:
    """模型参数占的字节；共享的张量（绑定的词嵌入和 lm_head）只算一次。"""
    seen: dict[int, int] = {}
    for p in model.parameters():
        seen[p.data_ptr()] = p.numel() * p.element_size()
    return sum(seen.values())


def kv_bytes_per_token(model) -> int:
    """每个 token 的 K 和 V 在所有层里一共占多少字节（float32）。"""
    c = model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return 2 * c.num_hidden_layers * c.num_key_value_heads * head_dim * 4


def best_seconds(run, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def batch1_decode_seconds(generate_one, prompt: list[int], new_tokens: int) -> float:
    """批大小 1 时一步 decode 的时间：生成 new_tokens 个与生成 1 个（只有 prefill）的时间差，
    除以多出来的 new_tokens − 1 步。"""
    full = best_seconds(lambda: generate_one(prompt, new_tokens))
    prefill_only = best_seconds(lambda: generate_one(prompt, 1))
    return (full - prefill_only) / (new_tokens - 1)


# ---------------------------------------------------------------------------- 输出


def table(rows: list[list[str]], header: list[str], align: str) -> str:
    lines = ["| " + " | ".join(header) + " |",
             "| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def agreement(ours: list[list[int]], theirs: list[list[int]]) -> int:
    return sum(a == b for a, b in zip(ours, theirs))


def warm_up(llm) -> None:
    """第一次前向有一次性的开销（分配内存、初始化线程池）：先跑一个小请求，不计时。"""
    llm.generate([[FIRST_PLAIN_ID] * 8], SamplingParams(max_tokens=2, ignore_eos=True))


def compare(path: Path, workload: Workload, hf_model, pad_id: int, settings: list[tuple[int, str | None]],
            sizing: list[Workload], fields: dict) -> dict[tuple[int, str | None], tuple[float, float]]:
    """一种工作负载：settings 里每个 (同时最多几个请求 B, 前缀缓存) 跑一次我们的，每个 B 跑一次 HF
    （每批 B 个）。打印表、HF 白算了多少、我们的时间去向。

    返回每个设置下我们对同一 B 的 HF 的比值：(按墙钟时间, 按 CPU 时间)。"""
    print(f"\n### {workload.name}：{len(workload.prompts)} 个请求，提示共 {workload.prompt_tokens} token，"
          f"要生成 {workload.output_tokens} token\n")
    hf_runs = {b: hf_generate(hf_model, workload, b, pad_id) for b in dict.fromkeys(b for b, _ in settings)}
    our_runs: dict[tuple[int, str | None], OurRun] = {}
    for b, cache in settings:
        llm = make_llm(path, sizing, b, cache, **fields)
        warm_up(llm)
        our_runs[(b, cache)] = our_generate(llm, workload)
        llm.shutdown()

    def rate(run) -> float:
        return workload.output_tokens / run.seconds

    rows = []
    for b, hf in hf_runs.items():
        rows.append(["HF generate（左填充）", str(b), f"{hf.seconds:.1f}", f"{hf.cpu_seconds:.1f}",
                     f"{rate(hf):.1f}", "", ""])
    ratios = {}
    for (b, cache), run in our_runs.items():
        hf = hf_runs[b]
        ratios[(b, cache)] = (rate(run) / rate(hf), hf.cpu_seconds / run.cpu_seconds)
        rows.append([f"LLM.generate{cache_label(cache)}", str(b), f"{run.seconds:.1f}", f"{run.cpu_seconds:.1f}",
                     f"{rate(run):.1f}", f"{ratios[(b, cache)][0]:.2f}×", f"{ratios[(b, cache)][1]:.2f}×"])
    print(table(rows, ["", "同时最多", "墙钟 s", "CPU s", "生成 token/s", "对 HF", "对 HF（CPU 时间）"],
                "lrrrrrr"))
    print("\n“对 HF”比的是同样“同时最多”的 HF：它每批这么多个请求。CPU 时间是这个进程所有线程用掉的，"
          "机器上别的负载对它影响小。\n")

    useful = workload.prompt_tokens + workload.output_tokens
    for b, hf in hf_runs.items():
        print(f"- HF 每批 {b} 个：连填充带陪跑一共算了 {hf.computed_tokens} 个 token，有用的只有 {useful} 个"
              f"（{useful / hf.computed_tokens:.0%}）；与我们的输出逐 token 一致的请求 "
              f"{agreement(our_runs[next(k for k in our_runs if k[0] == b)].outputs, hf.outputs)} / {len(hf.outputs)}")
    for (b, cache), run in our_runs.items():
        p_wall, p_cpu, p_steps = run.forward(prefill=True)
        d_wall, d_cpu, d_steps = run.forward(prefill=False)
        sizes = [s.batch_size for s in run.steps if not s.is_prefill]
        mean_batch = statistics.mean(sizes) if sizes else 0
        other = run.cpu_seconds - p_cpu - d_cpu
        print(f"- LLM.generate{cache_label(cache)}，同时最多 {b} 个，CPU 时间的去向：prefill 前向 {p_cpu:.1f} s"
              f"（{p_steps} 步），decode 前向 {d_cpu:.1f} s（{d_steps} 步，平均批大小 {mean_batch:.1f}），"
              f"前向之外（没和前向重叠的调度、Python）{other:.1f} s（{other / run.cpu_seconds:.0%}）；"
              f"前向的墙钟时间 {p_wall + d_wall:.1f} s，全程 {run.seconds:.1f} s")
    first = next(iter(our_runs.values())).outputs
    for key, run in our_runs.items():
        if run.outputs != first:
            print(f"- 注意：不同设置下我们的输出不一样：{cache_label(key[1])}、同时最多 {key[0]} 个时只有 "
                  f"{agreement(run.outputs, first)} / {len(first)} 个请求与第一种设置一致")
    print("\n（左填充改变了 HF 那边浮点求和的顺序，个别请求在近似平局处分叉是可能的；下面另和不填充的参照比。）")
    return ratios


def cache_label(cache: str | None) -> str:
    return "" if cache is None else f"（{cache}）"


def check_against_reference(path: Path, llm, workload: Workload, count: int) -> None:
    """挑 count 个最短的请求，和不填充的 HF 参照（minibook.hf.hf_greedy）逐 token 比。"""
    from minibook.hf import hf_greedy

    order = sorted(range(len(workload.prompts)),
                   key=lambda i: len(workload.prompts[i]) + 4 * workload.max_tokens[i])[:count]
    prompts = [workload.prompts[i] for i in order]
    budgets = [workload.max_tokens[i] for i in order]
    ours = llm.generate(prompts, [SamplingParams(max_tokens=n, ignore_eos=True) for n in budgets])
    same = [list(r["token_ids"]) == hf_greedy(path, p, n) for r, p, n in zip(ours, prompts, budgets)]
    print(f"\n和 HF 的贪心参照（不填充，逐个生成）逐 token 比：请求 {order}，"
          f"{sum(same)} / {len(same)} 一致")
    if not all(same):
        raise SystemExit("错误：我们的贪心输出和 HF 的参照不一致")


def run_bound(path: Path, llm, hf_model, prompt_len: int, new_tokens: int) -> None:
    """批大小 1 的 decode：实测每步时间，对比“权重 + KV 各读一遍”的带宽上界。"""
    from transformers import GenerationConfig

    from minibook.hf import quiet_transformers

    bandwidth = read_bandwidth()
    gen = torch.Generator().manual_seed(1)
    prompt = torch.randint(FIRST_PLAIN_ID, hf_model.config.vocab_size, (prompt_len,), generator=gen).tolist()
    context = prompt_len + new_tokens / 2  # 这几步 decode 平均要读的 KV 长度
    step_bytes = weight_bytes(hf_model) + context * kv_bytes_per_token(hf_model)
    bound_seconds = step_bytes / bandwidth

    def ours(p, n):
        llm.generate([p], SamplingParams(max_tokens=n, ignore_eos=True))

    def theirs(p, n):
        config = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=n, min_new_tokens=n,
                                  eos_token_id=None, pad_token_id=0)
        ids = torch.tensor([p])
        with quiet_transformers(), torch.inference_mode():
            hf_model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)

    print(f"\n### 批大小 1 的 decode 与内存带宽上界\n")
    print(f"内存读带宽（对 512 MiB 的张量求和，{torch.get_num_threads()} 个线程）：{bandwidth / 1e9:.1f} GB/s；"
          f"每步 decode 至少读权重 {weight_bytes(hf_model) / 1e6:.0f} MB + KV "
          f"{context * kv_bytes_per_token(hf_model) / 1e6:.1f} MB，上界 {1 / bound_seconds:.1f} token/s。\n")
    rows = []
    for name, fn in [("LLM.generate", ours), ("HF generate", theirs)]:
        fn(prompt, 2)  # 预热
        step = batch1_decode_seconds(fn, prompt, new_tokens)
        rows.append([name, f"{step * 1e3:.1f}", f"{1 / step:.1f}", f"{bound_seconds / step:.0%}"])
    print(table(rows, ["", "每步 ms", "decode token/s", "占带宽上界"], "lrrr"))


def run_profile(llm, workload: Workload, top: int = 8) -> None:
    """剖析我们这边跑一遍工作负载：自身 CPU 时间最多的 aten 算子各占墙钟时间多少。"""
    from torch.profiler import ProfilerActivity, profile

    params = [SamplingParams(max_tokens=n, ignore_eos=True) for n in workload.max_tokens]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        started = time.perf_counter()
        llm.generate(workload.prompts, params)
        seconds = time.perf_counter() - started
    ops = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    ops.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    in_ops = sum(e.self_cpu_time_total for e in ops) / 1e6
    print(f"\n### 剖析：LLM.generate 跑{workload.name}，{seconds:.1f} s（开着剖析器，比平时慢）\n")
    for e in ops[:top]:
        print(f"    {e.key:<50} {e.self_cpu_time_total / 1e6 / seconds:6.1%}")
    print(f"    {'全部 aten 算子合计':<44} {in_ops / seconds:6.1%}（其余是 Python 与调度）")
    if in_ops < seconds / 2:
        print("算子几乎没记到？重叠调度时前向在工作线程上，剖析器看不到它："
              "加上 MINISGL_DISABLE_OVERLAP_SCHEDULING=1 再跑")


# ---------------------------------------------------------------------------- main


def forward_threads(path: Path, workloads: list[Workload]) -> int:
    """前向用几个 torch 线程：重叠时是工作线程上的，否则就是调度器线程上的。"""
    llm = make_llm(path, workloads, 1, None)
    worker = getattr(llm.engine, "worker", None)
    n = worker.num_threads if worker is not None else torch.get_num_threads()
    llm.shutdown()
    return n


def compile_note(max_bs: int | None) -> str:
    if max_bs is None:
        return "decode 编译：这棵树的默认"
    return f"decode 编译到批大小 {max_bs}" if max_bs > 0 else "decode 不编译"


def machine_load() -> str:
    """机器上别的进程抢不抢 CPU：1 分钟平均负载对核数。负载高时墙钟时间偏大，CPU 时间受影响小。"""
    return f"机器的 1 分钟平均负载 {os.getloadavg()[0]:.1f}（{os.cpu_count()} 个核）"


QUICK = dict(requests=12, prompt_len=(16, 64), max_tokens=(8, 32), prefix_len=64, prefix_requests=8,
             batch_sizes=[4, 12], check=2, bound_tokens=17)


def parse_args(argv: list[str] | None):
    parser = cli.ArgumentParser(
        prog="python examples/ch11_benchmark.py",
        description="离线吞吐：LLM.generate 对 Hugging Face generate（同一次运行里比），"
                    "外加批大小 1 的 decode 占内存带宽上界的比例",
        epilog="示例：\n  python examples/ch11_benchmark.py --quick\n"
               "  python examples/ch11_benchmark.py --requests 32 --batch-sizes 8 --threads 2")
    parser.add_argument("--requests", type=int, default=64, metavar="N", help="请求数（默认 64）")
    parser.add_argument("--prompt-len", type=int, nargs=2, default=(16, 256), metavar=("MIN", "MAX"),
                        help="提示长度的区间（默认 16 256）")
    parser.add_argument("--max-tokens", type=int, nargs=2, default=(16, 128), metavar=("MIN", "MAX"),
                        help="每个请求 max_tokens 的区间（默认 16 128）")
    parser.add_argument("--prefix-len", type=int, default=200, metavar="N",
                        help="共享前缀变体里系统提示的长度；0 表示不跑这个变体（默认 200）")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 64], metavar="B",
                        help="同时最多几个请求：HF 每批 B 个，我们 max_running_req=B；每个 B 两边各跑一次"
                             "（默认 16 64；共享前缀变体只用第一个）")
    parser.add_argument("--prefix-requests", type=int, default=32, metavar="N",
                        help="共享前缀变体的请求数（默认 32）")
    parser.add_argument("--seed", type=int, default=0, help="抽工作负载的随机种子（默认 0）")
    parser.add_argument("--check", type=int, default=3, metavar="K",
                        help="挑 K 个请求和不填充的 HF 参照逐 token 比（默认 3）")
    parser.add_argument("--bound-tokens", type=int, default=33, metavar="N",
                        help="批大小 1 的 decode 量几步（默认 33；0 表示不量）")
    parser.add_argument("--threads", type=int, default=1, metavar="T",
                        help="torch 的线程数（默认 1：机器上还有别人在跑时只用一个核）")
    parser.add_argument("--cuda-graph-max-bs", type=int, default=None, metavar="N",
                        help="decode 编译（GPU 上录 CUDA 图）到批大小 N，同 LLM 的 cuda_graph_max_bs"
                             "（默认不给：用这棵树的默认，CPU 上不编译）；编译的时间不算在吞吐里")
    parser.add_argument("--quick", action="store_true",
                        help="小规模快速跑一遍（12 个请求，提示 16–64，max_tokens 8–32，同时最多 4 和 12 个）")
    parser.add_argument("--profile", action="store_true",
                        help="只剖析我们这一侧跑混合负载，看时间花在哪些算子上"
                             "（重叠调度时请加 MINISGL_DISABLE_OVERLAP_SCHEDULING=1）")
    args = parser.parse_args(argv)
    if args.quick:  # --quick 换一组默认值；命令行上明写的参数仍然算数
        parser.set_defaults(**QUICK)
        args = parser.parse_args(argv)
    for name in ("requests", "prefix_requests", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} 必须 ≥ 1")
    if min(args.batch_sizes) < 1:
        parser.error("--batch-sizes 的每一个都必须 ≥ 1")
    for name in ("prompt_len", "max_tokens"):
        lo, hi = getattr(args, name)
        if not 1 <= lo <= hi:
            parser.error(f"--{name.replace('_', '-')} 要求 1 ≤ MIN ≤ MAX，收到 {lo} {hi}")
    if args.cuda_graph_max_bs is not None and args.cuda_graph_max_bs < 0:
        parser.error("--cuda-graph-max-bs 必须 ≥ 0（0 表示不编译）")
    if args.bound_tokens == 1 or args.bound_tokens < 0:
        parser.error("--bound-tokens 是 0（不量）或 ≥ 2")
    return args


def main(argv: list[str] | None = None) -> int:
    from minibook.hf import quiet_transformers
    from minibook.models import default_model

    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    path = default_model()
    hf_model = load_hf_model(path)
    vocab = hf_model.config.vocab_size
    with quiet_transformers():
        from minisgl.utils.hf import load_tokenizer
        tokenizer = load_tokenizer(path)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    mixed = mixed_workload(args.requests, tuple(args.prompt_len), tuple(args.max_tokens), vocab, args.seed)
    workloads = [mixed]
    if args.prefix_len > 0:
        workloads.append(mixed_workload(args.prefix_requests, (16, 64), tuple(args.max_tokens), vocab,
                                        args.seed + 1, prefix_len=args.prefix_len))

    overlap = "关" if os.environ.get("MINISGL_DISABLE_OVERLAP_SCHEDULING") else "开（若这棵树有）"
    # 重叠时前向在工作线程上，它的线程数由 Engine.start_worker 定（第 11 章起和调度器线程相同）
    print(f"模型 {path.name}，float32，调度器线程 {torch.get_num_threads()} 个 torch 线程，"
          f"前向 {forward_threads(path, workloads)} 个；贪心、不在 EOS 处停；"
          f"重叠调度{overlap}；{compile_note(args.cuda_graph_max_bs)}。数字随机器和负载而变；开始时{machine_load()}。")
    ids = torch.tensor([[FIRST_PLAIN_ID] * 8])  # 预热 HF
    with quiet_transformers(), torch.inference_mode():
        hf_model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=2, do_sample=False,
                          pad_token_id=pad_id)

    first_b = args.batch_sizes[0]
    if args.profile:
        llm = make_llm(path, workloads, first_b, None, **fields)
        warm_up(llm)
        run_profile(llm, mixed)
        llm.shutdown()
        return 0

    fields = {} if args.cuda_graph_max_bs is None else {"cuda_graph_max_bs": args.cuda_graph_max_bs}
    ratios = compare(path, mixed, hf_model, pad_id, [(b, None) for b in args.batch_sizes], workloads, fields)
    if len(workloads) > 1:
        compare(path, workloads[1], hf_model, pad_id, [(first_b, t) for t in cache_types()], workloads, fields)
    # 同一时刻只留一个 LLM：Engine 用的是进程里唯一的全局上下文，shutdown 会把它清掉
    bound_prompt = 64  # 量批大小 1 的 decode 用的提示长度
    probe = Workload("批大小 1", [[FIRST_PLAIN_ID] * bound_prompt], [max(args.bound_tokens, 1)])
    llm = make_llm(path, workloads + [probe], first_b, None, **fields)  # 对答案、量批大小 1 用这一个
    warm_up(llm)
    if args.check:
        check_against_reference(path, llm, mixed, args.check)
    if args.bound_tokens:
        run_bound(path, llm, hf_model, prompt_len=bound_prompt, new_tokens=args.bound_tokens)
    llm.shutdown()

    print(f"\n混合负载上 LLM.generate 的吞吐（对同样“同时最多”的 HF；括号里按 CPU 时间）：\n")
    for (b, _), (wall, cpu) in ratios.items():
        print(f"- 同时最多 {b} 个请求：{wall:.2f} 倍（{cpu:.2f} 倍）")
    print(f"\n目标 ≥ 2 倍。结束时{machine_load()}。")
    return 0


if __name__ == "__main__":
    cli.run(main)
