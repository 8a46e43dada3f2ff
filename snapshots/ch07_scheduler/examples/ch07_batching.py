"""第 7 章的演示：同样 8 个请求，静态批处理和连续批处理各跑一遍，量总时间、每个请求的延迟和每一步的批大小。

两种做法用的是同一个 Scheduler，只差 PrefillManager 的一条规则：

- 连续批处理（本章的 PrefillManager）：每一步都看队首能不能接纳，有空的行、页够就进来；
- 静态批处理（下面的 StaticPrefillManager）：只要还有请求在跑就不接纳，一批全部结束才开下一批。

8 个请求同时到达，max_tokens 从 4 到 64 各不相同，max_running_req = 4 小于 8，
所以两种做法都要分几批；差别在于短请求结束后空出来的行有没有人补上。

    python examples/ch07_batching.py                  # SmolLM2（默认）
    python examples/ch07_batching.py --model tiny_qwen3
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from minisgl.core import SamplingParams
from minisgl.scheduler import Scheduler, SchedulerConfig
from minisgl.scheduler.prefill import PrefillManager

TEXTS = ["The capital of France is", "Once upon a time,", "def fibonacci(n):",
         "Water boils at", "The three primary colors are", "import numpy as np\n",
         "My favourite fruit is", "1, 2, 3, 4,"]
MAX_TOKENS = [64, 8, 40, 4, 56, 16, 32, 24]  # 长短不一：4…64
MAX_RUNNING = 4  # 比 8 小：一次放不下全部请求，连续批处理才有空位可补


class StaticPrefillManager(PrefillManager):
    """静态批处理：还有请求在跑时一个新请求都不接纳，等这一批全部结束再开下一批。"""

    def schedule_next_batch(self, prefill_budget: int):
        if self.decode_manager.runnable:
            return None
        return super().schedule_next_batch(prefill_budget)


@dataclass
class Trace:
    """一种做法跑一遍的记录；时间都从 8 个请求到达（第一步开始之前）算起，单位秒。"""

    policy: str
    phases: list[str] = field(default_factory=list)  # 每一步："prefill" 或 "decode"
    batch_sizes: list[int] = field(default_factory=list)  # 每一步的批大小
    step_ends: list[float] = field(default_factory=list)  # 每一步结束的时刻
    first_token: dict[int, float] = field(default_factory=dict)  # uid → 拿到第一个 token 的时刻
    finished: dict[int, float] = field(default_factory=dict)  # uid → 结束的时刻
    tokens: dict[int, list[int]] = field(default_factory=dict)  # uid → 生成的 token

    @property
    def total(self) -> float:
        return self.step_ends[-1]

    @property
    def durations(self) -> list[float]:
        """每一步用了多久。"""
        return [b - a for a, b in zip([0.0] + self.step_ends, self.step_ends)]

    def decode_step_time(self) -> dict[int, float]:
        """decode 一步的平均时间，按批大小分开算：{批大小: 秒}。"""
        by_size: dict[int, list[float]] = {}
        for phase, size, dt in zip(self.phases, self.batch_sizes, self.durations):
            if phase == "decode":
                by_size.setdefault(size, []).append(dt)
        return {size: sum(v) / len(v) for size, v in sorted(by_size.items())}

    @property
    def latencies(self) -> list[float]:
        return [self.finished[uid] for uid in sorted(self.finished)]


def build_scheduler(model_path) -> Scheduler:
    # 池子给足：8 个请求的最坏情况同时放得下，限制批大小的只有 max_running_req
    return Scheduler(SchedulerConfig(model_path=model_path, max_running_req=MAX_RUNNING,
                                     page_size=4, num_page_override=256, max_seq_len_override=128))


def use_policy(sched: Scheduler, policy: str) -> None:
    """把调度器的 PrefillManager 换成某种做法；别的部件（页表、分配器、decode 管理器）不变。"""
    cls = StaticPrefillManager if policy == "静态批处理" else PrefillManager
    old = sched.prefill_manager
    assert not old.runnable and not sched.decode_manager.runnable, "换做法要在调度器空闲时"
    sched.prefill_manager = cls(old.allocator, old.table_manager, old.decode_manager)


def run_policy(sched: Scheduler, policy: str, prompts: list[list[int]],
               max_tokens: list[int]) -> Trace:
    """8 个请求同时交给调度器，一步一步跑到全部结束，给每一步计时。"""
    use_policy(sched, policy)
    trace = Trace(policy)
    for uid, (ids, n) in enumerate(zip(prompts, max_tokens)):
        # ignore_eos：每个请求正好生成 max_tokens 个，两种做法的工作量完全一样
        sched.add_req(uid, torch.tensor(ids, dtype=torch.int32), SamplingParams(max_tokens=n, ignore_eos=True))
        trace.tokens[uid] = []
    start = time.perf_counter()
    while sched.runnable:
        outputs = sched.step()
        now = time.perf_counter() - start
        # 这一步的每个请求都交回一个 token；第一次交回的请求说明这一步是它的 prefill
        is_prefill = [not trace.tokens[o.uid] for o in outputs]
        assert all(is_prefill) or not any(is_prefill), "本章的一步要么全是 prefill，要么全是 decode"
        trace.phases.append("prefill" if is_prefill[0] else "decode")
        trace.batch_sizes.append(len(outputs))
        trace.step_ends.append(now)
        for o in outputs:
            trace.tokens[o.uid].append(o.next_token)
            trace.first_token.setdefault(o.uid, now)
            if o.finished:
                trace.finished[o.uid] = now
    assert sorted(trace.finished) == list(range(len(prompts))), "每个请求都应当结束"
    return trace


def compare(model_path, warmup: bool = True) -> dict[str, Trace]:
    """两种做法各跑一遍（同一个调度器、同样的请求），返回 {做法: Trace}。"""
    from minibook.hf import encode

    prompts = [encode(model_path, t) for t in TEXTS]
    sched = build_scheduler(model_path)
    if warmup:  # 第一次前向要做一些一次性的准备，不算进任何一种做法
        run_policy(sched, "连续批处理", prompts[:2], [2, 2])
    traces = {p: run_policy(sched, p, prompts, MAX_TOKENS) for p in ("静态批处理", "连续批处理")}
    sched.shutdown()
    static, continuous = traces.values()
    # 同样的请求、贪心解码：换一种拼批方式，每个请求的输出一个 token 都不该变
    assert static.tokens == continuous.tokens
    assert all(len(static.tokens[uid]) == n for uid, n in enumerate(MAX_TOKENS))
    return traces


def runs(sizes: list[int]) -> str:
    """[4, 4, 4, 3, 3] → "4×3 3×2"：把批大小的序列压成一行。"""
    parts, i = [], 0
    while i < len(sizes):
        j = i
        while j < len(sizes) and sizes[j] == sizes[i]:
            j += 1
        parts.append(f"{sizes[i]}×{j - i}")
        i = j
    return " ".join(parts)


def report(traces: dict[str, Trace]) -> None:
    print(f"8 个请求，max_tokens = {MAX_TOKENS}，max_running_req = {MAX_RUNNING}")
    print(f"{'做法':<8}{'步数':>6}{'prefill 步':>12}{'总时间':>10}{'平均延迟':>10}"
          f"{'平均批大小':>12}")
    for name, t in traces.items():
        mean_batch = sum(t.batch_sizes) / len(t.batch_sizes)
        print(f"{name:<7}{len(t.phases):>7}{t.phases.count('prefill'):>12}{t.total:>10.2f}s"
              f"{sum(t.latencies) / len(t.latencies):>10.2f}s{mean_batch:>14.2f}")
    print("每个请求从到达到结束的时间（秒）：")
    print("  " + " ".join(f"{'uid ' + str(u):>7}" for u in range(len(MAX_TOKENS))))
    print("  " + " ".join(f"{'max ' + str(n):>7}" for n in MAX_TOKENS))
    for name, t in traces.items():
        print("  " + " ".join(f"{x:>7.2f}" for x in t.latencies) + f"   {name}")
    for name, t in traces.items():
        print(f"{name}每一步的批大小：{runs(t.batch_sizes)}")
    steps = [t.decode_step_time() for t in traces.values()]
    sizes = sorted(set().union(*steps))
    print("decode 一步的平均时间（毫秒），按批大小：")
    for name, per_size in zip(traces, steps):
        print(f"  {name}：" + "，".join(f"{b} 个 {per_size[b] * 1000:.1f}" for b in sizes if b in per_size))


def main() -> None:
    from minibook import cli
    from minibook.models import smollm2, tiny_qwen3

    parser = cli.ArgumentParser(description="静态批处理与连续批处理：同样 8 个请求")
    parser.add_argument("--model", choices=["smollm2", "tiny_qwen3"], default="smollm2")
    args = parser.parse_args()
    path = smollm2() if args.model == "smollm2" else tiny_qwen3()
    report(compare(path))


if __name__ == "__main__":
    main()
