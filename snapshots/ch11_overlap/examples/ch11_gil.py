"""第 11 章的演示：把一段 CPU 工作和一次前向"重叠"起来，能省多少时间，取决于这段工作放不放 GIL。

一次"前向"是 300 个 torch 算子（矩阵乘和 tanh 交替），在一个工作线程上跑；主线程同时做一段
已知时长的 CPU 工作。依次执行要 前向 + 工作；重叠执行理想情况下只要 max(前向, 工作)。
三种工作：
  - sleep：time.sleep，整段时间都不拿 GIL；
  - torch：一串 torch 算子，算子内部放开 GIL（和前向抢的是 CPU 核，不是 GIL）；
  - python：纯 Python 循环，一直拿着 GIL。
前向线程每发射一个算子都要先拿到 GIL；主线程在跑纯 Python 时，它要等解释器按
sys.setswitchinterval（默认 5 ms）强制换手，于是最后一种常常比依次执行还慢。

    python examples/ch11_gil.py                      # 默认：矩阵宽 512，工作 30 ms
    python examples/ch11_gil.py --dim 256 --work-ms 10 --repeats 5   # 小一号，几秒跑完
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import torch

NUM_OPS = 300  # 前向里的算子个数（150 个矩阵乘 + 150 个 tanh）
ROWS = 64  # 每个矩阵乘的行数


def make_forward(dim: int) -> Callable[[], torch.Tensor]:
    """一次"前向"：NUM_OPS 个算子依次执行，每个都要经过 Python 发射一次。"""
    gen = torch.Generator().manual_seed(0)
    weights = [torch.randn(dim, dim, generator=gen) / dim**0.5 for _ in range(4)]
    x0 = torch.randn(ROWS, dim, generator=gen)

    def forward() -> torch.Tensor:
        x = x0
        for i in range(NUM_OPS // 2):
            x = torch.tanh(x @ weights[i % 4])
        return x

    return forward


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()  # 热身
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def paired_median_ms(a: Callable[[], object], b: Callable[[], object],
                     repeats: int) -> tuple[float, float]:
    """a、b 轮流跑：机器上别的负载随时间变化时，两边受到的影响差不多。"""
    a(), b()
    times_a, times_b = [], []
    for _ in range(repeats):
        for fn, times in ((a, times_a), (b, times_b)):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times_a), statistics.median(times_b)


def python_work(iterations: int) -> int:
    """纯 Python：一直拿着 GIL。"""
    total = 0
    for i in range(iterations):
        total += i * i % 7
    return total


def make_work(kind: str, work_ms: float) -> Callable[[], object]:
    """一段单独跑时约 work_ms 的 CPU 工作。工作量定好了就不变，被拖慢会体现在时间上。"""
    if kind == "sleep":
        return lambda: time.sleep(work_ms / 1e3)
    if kind == "torch":
        a = torch.randn(256, 256)
        unit = median_ms(lambda: a @ a, 5)
        n = max(1, round(work_ms / unit))
        return lambda: [a @ a for _ in range(n)]
    assert kind == "python", kind
    probe = 200_000
    unit = median_ms(lambda: python_work(probe), 3) / probe
    n = max(1, round(work_ms / unit))
    return lambda: python_work(n)


WORK_NAMES = {"sleep": "time.sleep（不拿 GIL）", "torch": "torch 算子（算子里放开 GIL）",
              "python": "纯 Python（一直拿着 GIL）"}


def cell(text: str, width: int, left: bool = False) -> str:
    """按显示宽度补齐（一个汉字占两列），表头和各行的列才对得齐。"""
    shown = sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)
    pad = " " * max(0, width - shown)
    return text + pad if left else pad + text


def main() -> None:
    parser = argparse.ArgumentParser(description="GIL 与重叠：依次执行 vs 在工作线程上重叠")
    parser.add_argument("--dim", type=int, default=512, help="矩阵宽度：决定一次前向多长")
    parser.add_argument("--work-ms", type=float, default=30.0, help="每步 CPU 工作的时长")
    parser.add_argument("--repeats", type=int, default=7, help="每种情况重复几次取中位数")
    args = parser.parse_args()

    torch.set_num_threads(1)  # 主线程的算子单线程
    # 工作线程同样单线程：两个线程各占一个核，intra-op 线程不来抢
    worker = ThreadPoolExecutor(1, initializer=torch.set_num_threads, initargs=(1,))
    dim = args.dim
    forward = make_forward(dim)
    forward_ms = median_ms(forward, args.repeats)
    print(f"前向：{NUM_OPS} 个算子（矩阵 [{ROWS}, {dim}] × [{dim}, {dim}] 与 tanh 交替），"
          f"单独跑 {forward_ms:.0f} ms")

    def normal(work):
        forward()
        work()

    def overlap(work):
        future = worker.submit(forward)  # 前向交给工作线程
        work()  # 主线程同时做自己的工作
        future.result()  # 等前向完成

    print("\n" + cell("每步的 CPU 工作", 26, left=True) + cell("单独", 7) + cell("依次", 8)
          + cell("重叠", 8) + cell("max", 7) + cell("sum", 7) + "  重叠 / 依次")
    results = {}
    for kind in ("sleep", "torch", "python"):
        work = make_work(kind, args.work_ms)
        alone = median_ms(work, args.repeats)
        t_normal, t_overlap = paired_median_ms(lambda: normal(work), lambda: overlap(work),
                                               args.repeats)
        results[kind] = t_overlap
        print(cell(WORK_NAMES[kind], 26, left=True) + f"{alone:>7.0f}{t_normal:>8.0f}{t_overlap:>8.0f}"
              f"{max(forward_ms, alone):>7.0f}{forward_ms + alone:>7.0f}  {t_overlap / t_normal:.2f}")

    print("\n纯 Python 工作，换手间隔 sys.setswitchinterval 不同：")
    work = make_work("python", args.work_ms)
    default = sys.getswitchinterval()
    for interval in (0.0001, 0.001, default, 0.02):
        sys.setswitchinterval(interval)
        t_overlap = median_ms(lambda: overlap(work), args.repeats)
        mark = "（默认）" if interval == default else ""
        print(f"  {interval * 1e3:>5.1f} ms" + cell(mark, 10, left=True) + f"重叠一步 {t_overlap:>5.0f} ms")
    sys.setswitchinterval(default)
    worker.shutdown()


if __name__ == "__main__":
    main()
