"""在线压测：请求按泊松过程到达服务器，流式接收，记下每一段文字到达的时刻。

- TTFT（首个 token 的时间）= 第一段文字到达 − 发出；
- ITL（相邻两段文字的间隔）：流式时一段通常就是一个 token，扣住的半个字会让一段多于一个；
- TPOT（平均每个输出 token 的时间）= (最后一段 − 第一段) / (输出 token 数 − 1)；
- 吞吐 = 全部输出 token / 从压测开始到最后一个请求结束。

命令行（服务器已经在跑）见 `python -m minisgl.benchmark --help`：

    python -m minisgl.benchmark --url http://127.0.0.1:1919 --tokenizer <模型目录> \
        --num-requests 32 --rate 2 --input-len 100 400 --output-len 50 200
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import math
import random
import time
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class RequestTrace:
    sent: float  # 发出的时刻（秒，从压测开始算）
    chunks: list[float]  # 每一段文字到达的时刻
    prompt_tokens: int
    output_tokens: int
    text: str = ""  # 收到的全部文字：温度 0 时，两种配置的同一个请求应当一字不差

    @property
    def ttft(self) -> float:
        return self.chunks[0] - self.sent

    @property
    def tpot(self) -> float | None:
        """只生成 1 个 token 的请求没有 TPOT。"""
        if self.output_tokens < 2:
            return None
        return (self.chunks[-1] - self.chunks[0]) / (self.output_tokens - 1)

    @property
    def itl(self) -> list[float]:
        return [b - a for a, b in zip(self.chunks, self.chunks[1:])]


@dataclass(frozen=True)
class OnlineResult:
    traces: list[RequestTrace]
    makespan: float  # 从压测开始到最后一个请求结束，秒


def poisson_arrivals(num_requests: int, rate: float, seed: int = 0) -> list[float]:
    """第 i 个请求在第几秒发出：相邻两个的间隔服从均值 1/rate 的指数分布。rate 为 inf 时全部在 0 秒发出。"""
    if not (isinstance(num_requests, int) and num_requests >= 1):
        raise ValueError(f"请求数必须是正整数，收到 {num_requests!r}")
    if not (isinstance(rate, (int, float)) and rate > 0):
        raise ValueError(f"rate（每秒几个请求）必须大于 0，收到 {rate!r}；想一次全发出去就用 inf")
    if math.isinf(rate):
        return [0.0] * num_requests
    rng = random.Random(seed)
    t, times = 0.0, []
    for _ in range(num_requests):
        times.append(t)
        t += rng.expovariate(rate)
    return times


async def _one(client: httpx.AsyncClient, url: str, prompt: str, max_tokens: int, start_at: float,
               t0: float) -> RequestTrace:
    await asyncio.sleep(max(0.0, t0 + start_at - time.perf_counter()))
    sent = time.perf_counter() - t0
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    chunks: list[float] = []
    pieces: list[str] = []
    usage = None
    async with client.stream("POST", f"{url}/v1/completions", json=body) as resp:
        if resp.status_code != 200:
            detail = (await resp.aread()).decode(errors="replace")[:300]
            raise RuntimeError(f"请求失败：HTTP {resp.status_code}：{detail}")
        async for line in resp.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                break
            event = json.loads(line[len("data: "):])
            if event.get("usage"):
                usage = event["usage"]
            text = "".join(choice.get("text") or "" for choice in event.get("choices", []))
            if text:
                chunks.append(time.perf_counter() - t0)
                pieces.append(text)
    if usage is None or not chunks:
        raise RuntimeError("服务器的流里没有文字或没有 usage（要 stream_options.include_usage）")
    return RequestTrace(sent, chunks, usage["prompt_tokens"], usage["completion_tokens"], "".join(pieces))


def run_online(url: str, requests: list[tuple[str, int]], rate: float, seed: int = 0,
               timeout: float = 600.0) -> OnlineResult:
    """requests 是 [(提示文字, max_tokens)]；按 poisson_arrivals(len, rate, seed) 的时刻发出，全部结束后返回。"""
    arrivals = poisson_arrivals(len(requests), rate, seed)

    async def main() -> OnlineResult:
        limits = httpx.Limits(max_connections=len(requests))  # 每个请求一条连接：到达时刻不被连接池拖后
        async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
            t0 = time.perf_counter()
            traces = await asyncio.gather(*[_one(client, url.rstrip("/"), prompt, max_tokens, at, t0)
                                            for (prompt, max_tokens), at in zip(requests, arrivals)])
            return OnlineResult(list(traces), time.perf_counter() - t0)

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # 平常的脚本：没有在跑的事件循环
        return asyncio.run(main())
    # 调用方自己已经在一个事件循环里（比如 Jupyter）：asyncio.run 不能嵌套，换一个线程跑
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


def percentile(values: list[float], q: float) -> float:
    """第 q 百分位（0～100），相邻两个数之间线性插值（和 numpy.percentile 的默认做法一样）。"""
    assert values and 0 <= q <= 100
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(result: OnlineResult) -> dict[str, float]:
    """TTFT、TPOT、ITL 的 P50 / P99（毫秒），输出吞吐（token/s）。"""
    traces = result.traces
    ttft = [t.ttft for t in traces]
    tpot = [t.tpot for t in traces if t.tpot is not None]
    itl = [gap for t in traces for gap in t.itl]
    summary = {"requests": len(traces), "output_tokens": sum(t.output_tokens for t in traces),
               "makespan_s": result.makespan}
    summary["throughput"] = summary["output_tokens"] / result.makespan
    for name, values in (("ttft", ttft), ("tpot", tpot), ("itl", itl)):
        for q in (50, 99):
            summary[f"{name}_p{q}_ms"] = percentile(values, q) * 1000 if values else float("nan")
    return summary
