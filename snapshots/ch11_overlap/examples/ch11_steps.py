"""第 11 章的测量：一步的时间花在哪、重叠能藏住多少、调度器的一步有多少时间拿着 GIL。

三个测量，都用真实的调度器和引擎跑 decode（数字取决于机器，只看同一次运行里的对比）：
  breakdown   不重叠时一步拆成三段：选批与准备 / 前向 / 处理结果，以及两种模式每步的总时间；
  inject      每步在调度器线程上多做一段已知的 CPU 工作（放开 GIL 的 sleep，或纯 Python），
              不重叠时一步 ≈ 前向 + 工作，重叠时 ≈ max(前向, 工作)——纯 Python 时做不到；
  gil         torch.profiler 看一步里的三段各有多少时间在 aten 算子里（算子执行时放开 GIL），
              其余时间在解释器里，拿着 GIL。

    python examples/ch11_steps.py                    # 三个测量都跑，tiny Qwen3
    python examples/ch11_steps.py inject --work-ms 10 --model smollm2
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Callable, Iterator

from minisgl.core import SamplingParams
from minisgl.llm import LLM

# 选批与准备 / 前向（在哪个线程上跑都算）/ 调度器线程等前向做完 / 处理结果（含注入的工作）
PHASES = ("准备", "前向", "等待", "处理")


@contextmanager
def overlap_mode(on: bool) -> Iterator[None]:
    """在 with 块里打开或关掉重叠调度（调度器在构造时读环境变量）。"""
    old = os.environ.get("MINISGL_DISABLE_OVERLAP_SCHEDULING")
    os.environ["MINISGL_DISABLE_OVERLAP_SCHEDULING"] = "0" if on else "1"
    try:
        yield
    finally:
        if old is None:
            del os.environ["MINISGL_DISABLE_OVERLAP_SCHEDULING"]
        else:
            os.environ["MINISGL_DISABLE_OVERLAP_SCHEDULING"] = old


def make_llm(path, overlap: bool, num_reqs: int, max_len: int = 96) -> LLM:
    with overlap_mode(overlap):
        llm = LLM(path, max_running_req=num_reqs, page_size=4,
                  num_page_override=num_reqs * max_len // 4 + 1, max_seq_len_override=max_len)
    assert llm.overlap == overlap
    return llm


def workload(num_reqs: int, prompt_len: int = 16) -> list[list[int]]:
    """num_reqs 个长短略有不同的提示（token id 随便取，只测时间）。"""
    return [[(7 * i + j) % 1000 + 10 for j in range(prompt_len + i % 4)] for i in range(num_reqs)]


def _timed(record: list[float], fn: Callable) -> Callable:
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        record.append(time.perf_counter() - start)
        return result
    return wrapper


def decode_step_ms(llm: LLM, num_reqs: int, max_tokens: int,
                   work: Callable[[], object] | None = None) -> dict[str, float]:
    """跑一遍 generate，返回满批 decode 步的中位数时间（ms）：一步、准备、前向、等待、处理。

    work 不为 None 时，每步处理完结果之后在调度器线程上再做一次（模拟反分词、发结果这类工作）。
    """
    samples = decode_step_samples(llm, num_reqs, max_tokens, work)
    return {name: statistics.median(values) for name, values in samples.items()}


def decode_step_samples(llm: LLM, num_reqs: int, max_tokens: int,
                        work: Callable[[], object] | None = None) -> dict[str, list[float]]:
    """同 decode_step_ms，但返回每一个满批 decode 步的时间（ms），方便几遍合在一起取中位数。"""
    times: dict[str, list[float]] = defaultdict(list)
    engine = llm.engine
    # 前向本身：工作线程上（重叠）或调度器线程上（不重叠）真正算的时间
    engine._forward_and_sample = _timed(times["前向"], engine._forward_and_sample)
    llm._schedule_next_batch = _timed(times["准备"], llm._schedule_next_batch)
    process = llm._process_last_data

    def process_and_work(last):
        start = time.perf_counter()
        if last[1].copy_done is not None:
            last[1].copy_done.synchronize()  # 先单独等：等待的时间不算进"处理"
        times["等待"].append(time.perf_counter() - start)
        start = time.perf_counter()
        replies = process(last)
        if work is not None:
            work()
        times["处理"].append(time.perf_counter() - start)
        return replies

    llm._process_last_data = process_and_work
    step = llm.step
    steps: list[float] = []
    sizes: list[int] = []

    def timed_step():
        start = time.perf_counter()
        replies = step()
        steps.append(time.perf_counter() - start)
        sizes.append(len(replies))
        return replies

    llm.step = timed_step
    llm.generate(workload(num_reqs), SamplingParams(max_tokens=max_tokens, ignore_eos=True))
    for name in ("step", "_schedule_next_batch", "_process_last_data"):
        delattr(llm, name)  # 恢复类上的方法
    del engine._forward_and_sample
    # 只看满批的 decode 步：一步报告 num_reqs 个结果；前几步（prefill、热身）和收尾不算
    full = [i for i, n in enumerate(sizes) if n == num_reqs][2:]
    pick = lambda xs: [xs[i] * 1e3 for i in full if i < len(xs)]  # noqa: E731
    return {"一步": pick(steps), **{name: pick(times[name]) for name in PHASES}}


def compare(path, num_reqs: int, max_tokens: int, rounds: int = 2,
            work: Callable[[], object] | None = None) -> dict[bool, dict[str, float]]:
    """两种模式轮流跑 rounds 遍（机器上的其他负载对两边影响差不多），所有满批步合在一起取中位数。"""
    pooled: dict[bool, dict[str, list[float]]] = {False: defaultdict(list), True: defaultdict(list)}
    for _ in range(rounds):
        for overlap in (False, True):
            llm = make_llm(path, overlap, num_reqs)
            for name, values in decode_step_samples(llm, num_reqs, max_tokens, work).items():
                pooled[overlap][name] += values
            llm.shutdown()
    return {mode: {name: statistics.median(values) for name, values in samples.items()}
            for mode, samples in pooled.items()}


def python_work(ms: float) -> Callable[[], int]:
    """一段纯 Python 工作：单独跑约 ms 毫秒，一直拿着 GIL。工作量固定，被拖慢会体现在时间上。"""
    def loop(n: int) -> int:
        total = 0
        for i in range(n):
            total += i * i % 7
        return total

    probe = 100_000
    loop(probe)  # 热身一次，再量 5 次取中位数：一次冷启动的测量会把工作量估小
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        loop(probe)
        samples.append(time.perf_counter() - start)
    n = max(1, round(probe * ms / (statistics.median(samples) * 1e3)))
    return lambda: loop(n)


def sleep_work(ms: float) -> Callable[[], None]:
    """一段不拿 GIL 的工作（像等网络、等另一个进程）：time.sleep。"""
    return lambda: time.sleep(ms / 1e3)


def gil_profile(path, num_reqs: int, max_tokens: int) -> dict[str, tuple[float, float]]:
    """不重叠时一步的三段，各自每步多少毫秒、其中多少毫秒不在 aten 算子里（拿着 GIL）。

    torch 的 Python 绑定在执行算子时放开 GIL；profiler 记下每个算子的起止，
    一段时间减去其中顶层算子的时间，剩下的就是解释器在跑 Python、拿着 GIL 的时间。
    每一段取各步的中位数：机器忙时个别步被操作系统打断，中位数不受它影响。
    """
    from torch.profiler import ProfilerActivity, profile

    llm = make_llm(path, overlap=False, num_reqs=num_reqs)
    labels = {"准备": (llm, "_schedule_next_batch"), "前向": (llm.engine, "_forward_and_sample"),
              "处理": (llm, "_process_last_data")}  # 不重叠时没有"等待"
    for label, (obj, name) in labels.items():
        fn = getattr(obj, name)
        setattr(obj, name, lambda *a, _fn=fn, _label=label, **k: _run_labelled(_label, _fn, a, k))
    prompts = workload(num_reqs)
    with _quiet_fd2(), profile(activities=[ProfilerActivity.CPU]) as prof:
        llm.generate(prompts, SamplingParams(max_tokens=max_tokens, ignore_eos=True))
    llm.shutdown()
    spans: dict[str, list[float]] = defaultdict(list)
    held: dict[str, list[float]] = defaultdict(list)
    for event in prof.events():
        if event.name.startswith("minisgl::"):
            label = event.name.removeprefix("minisgl::")
            spans[label].append(event.cpu_time_total / 1e3)
            held[label].append((event.cpu_time_total - _top_level_op_time(event)) / 1e3)
    return {label: (statistics.median(spans[label]), statistics.median(held[label]))
            for label in labels}


@contextmanager
def _quiet_fd2() -> Iterator[None]:
    """profiler 的 C++ 部分直接往 2 号文件描述符写两行启停日志：测量期间把它接到 /dev/null。"""
    import sys

    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _run_labelled(label: str, fn: Callable, args, kwargs):
    from torch.profiler import record_function

    with record_function("minisgl::" + label):
        return fn(*args, **kwargs)


def _top_level_op_time(event) -> float:
    """event 之内最外层 aten 算子的时间之和（微秒）；算子里面嵌套的算子不重复计。"""
    spent, stack = 0.0, list(event.cpu_children)
    while stack:
        child = stack.pop()
        if child.name.startswith("aten::"):
            spent += child.cpu_time_total
        else:  # 别的标签（例如嵌套的 record_function）：往里找算子
            stack.extend(child.cpu_children)
    return spent


def print_breakdown(result: dict[bool, dict[str, float]]) -> None:
    print(f"{'模式':<8}{'一步':>8}" + "".join(f"{name:>8}" for name in PHASES))
    for overlap in (False, True):
        r = result[overlap]
        print(f"{'重叠' if overlap else '不重叠':<8}{r['一步']:>8.2f}"
              + "".join(f"{r[name]:>8.2f}" for name in PHASES))


def main() -> None:
    parser = argparse.ArgumentParser(description="重叠调度：一步的时间、注入的 CPU 工作、GIL")
    parser.add_argument("what", nargs="*", choices=["breakdown", "inject", "gil", []],
                        help="做哪几个测量（默认全部）")
    parser.add_argument("--model", choices=["tiny_qwen3", "smollm2"], default="tiny_qwen3")
    parser.add_argument("--num-reqs", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--work-ms", type=float, default=10.0)
    args = parser.parse_args()
    args.what = args.what or ["breakdown", "inject", "gil"]

    from minibook import models

    path = getattr(models, args.model)()
    print(f"{path.name}，{args.num_reqs} 个请求一起 decode，每步时间取中位数（ms，随机器而变）")
    if "breakdown" in args.what:
        print("\n一步的时间：")
        print_breakdown(compare(path, args.num_reqs, args.max_tokens))
    if "inject" in args.what:
        for name, work in (("sleep（不拿 GIL）", sleep_work(args.work_ms)),
                           ("纯 Python（拿着 GIL）", python_work(args.work_ms))):
            print(f"\n每步在调度器线程上多做 {args.work_ms:.0f} ms 的 {name}：")
            print_breakdown(compare(path, args.num_reqs, args.max_tokens, work=work))
    if "gil" in args.what:
        print("\n不重叠时一步的三段，其中拿着 GIL 的部分（torch.profiler，带 profiler 的开销）：")
        for label, (ms, held) in gil_profile(path, args.num_reqs, args.max_tokens).items():
            print(f"  {label}：{ms:6.2f} ms/步，其中 {held:5.2f} ms 在解释器里（{held / ms:4.0%}）")


if __name__ == "__main__":
    main()
