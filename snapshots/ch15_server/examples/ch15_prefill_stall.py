"""一段长提示进来时，正在流式输出的请求要等多久：量每个流最长的 token 间隔。

    python examples/ch15_prefill_stall.py                         # 服务器的默认设置
    python examples/ch15_prefill_stall.py --no-decode-between-chunks --max-prefill-length 8192

做法：起一个服务器（命令行参数原样交给 `python -m minisgl`），3 个客户端流式生成（ignore_eos，
一直生成）；每个都收到 10 个 token 之后，第 4 个客户端发一段约 4000 个 token 的提示
（max_tokens=1，非流式）。记下每个流里相邻两段文字到达的间隔：长提示到达之前的最长间隔
（平时一步 decode 要多久），长提示到达到它的回答回来这段时间里的最长间隔（prefill 让流停了多久）。
"""

from __future__ import annotations

import asyncio
import random
import sys
import time

import httpx

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from ch15_server import ServerProcess  # noqa: E402

NUM_STREAMS = 3
LONG_PROMPT_WORDS = 4000  # 随机的常见英文词，一个词大约一个 token
WORDS = ("time year people way day man thing woman life child world school state family "
         "student group country problem hand part place case week company system program "
         "question work government number night point home water room mother area money").split()


async def stream_times(client: httpx.AsyncClient, seed: int, times: list[float],
                       stop: asyncio.Event) -> None:
    body = {"prompt": f"Story {seed}: once upon a time", "max_tokens": 100_000, "temperature": 0,
            "ignore_eos": True, "stream": True}
    async with client.stream("POST", "/v1/completions", json=body) as r:
        assert r.status_code == 200, await r.aread()
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                times.append(time.perf_counter())
            if stop.is_set():
                return  # 关掉连接：服务器取消这个请求


def max_gap(times: list[float], start: float, end: float) -> float:
    """[start, end] 里的最长间隔，包括 start 到第一个 token、最后一个 token 到 end。"""
    inside = [start] + [t for t in times if start < t < end] + [end]
    return max(b - a for a, b in zip(inside, inside[1:]))


async def measure(url: str) -> dict:
    stop = asyncio.Event()
    limits = httpx.Limits(max_connections=NUM_STREAMS + 2)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        times: list[list[float]] = [[] for _ in range(NUM_STREAMS)]
        tasks = [asyncio.create_task(stream_times(client, i, times[i], stop))
                 for i in range(NUM_STREAMS)]
        while min(map(len, times)) < 10:
            await asyncio.sleep(0.05)
        warm = time.perf_counter()
        await asyncio.sleep(2.0)  # 平时的间隔：长提示来之前的 2 秒
        rng = random.Random(0)
        prompt = " ".join(rng.choice(WORDS) for _ in range(LONG_PROMPT_WORDS))
        sent = time.perf_counter()
        r = await client.post("/v1/completions", json={"prompt": prompt, "max_tokens": 1})
        done = time.perf_counter()
        assert r.status_code == 200, r.text
        await asyncio.sleep(0.5)
        stop.set()
        await asyncio.gather(*tasks)
    return {"prompt_tokens": r.json()["usage"]["prompt_tokens"], "prefill_s": done - sent,
            "normal_gap": max(max_gap(t, warm, sent) for t in times),
            "stall_gap": [max_gap(t, sent, done) for t in times],
            "tokens_during": [sum(sent < x < done for x in t) for t in times]}


def main() -> None:
    from minibook.models import default_model

    flags = sys.argv[1:]
    print(f"== python -m minisgl {' '.join(flags) or '（默认设置）'}")
    with ServerProcess("--model-path", str(default_model()), *flags) as server:
        r = asyncio.run(measure(server.url))
    print(f"长提示 {r['prompt_tokens']} 个 token，从发出到回答回来 {r['prefill_s']:.1f} 秒")
    print(f"长提示来之前：{NUM_STREAMS} 个流最长的 token 间隔 {r['normal_gap'] * 1000:.0f} ms")
    print("长提示 prefill 期间：每个流最长的 token 间隔 "
          + "、".join(f"{g:.2f} 秒" for g in r["stall_gap"])
          + "；这期间各收到 " + "、".join(map(str, r["tokens_during"])) + " 段文字")


if __name__ == "__main__":
    main()
