"""压测的负载：N 个请求，提示和输出的长度在给定范围里均匀地随机取，种子固定（nano-vllm 的 bench.py 的做法）。

提示是随机的 token id：压测量的是引擎，不是模型说了什么；同一个种子每次得到同一批请求，
所以两种配置、两次运行比的是同一份活。可以让每个提示以同一段“系统提示”开头（shared_prefix 个 token），
像聊天服务那样：前缀缓存只在这时有用武之地。
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class BenchRequest:
    prompt_ids: list[int]
    max_tokens: int  # 压测时 ignore_eos：每个请求正好生成这么多个 token


def _check_range(name: str, bounds: tuple[int, int]) -> None:
    lo, hi = bounds
    if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi):
        raise ValueError(f"{name} 必须是 (最小, 最大) 两个正整数、最小不超过最大，收到 {bounds!r}")


def random_workload(num_requests: int, seed: int = 0, input_len: tuple[int, int] = (100, 1024),
                    output_len: tuple[int, int] = (100, 1024), vocab_size: int = 10000,
                    shared_prefix: int = 0) -> list[BenchRequest]:
    """num_requests 个请求：提示长度在 input_len 里、输出长度在 output_len 里（两端都含），token id < vocab_size。

    shared_prefix > 0 时每个提示前面再接同一段这么长的 token，input_len 说的是前缀后面那一段。
    """
    if not (isinstance(num_requests, int) and num_requests >= 1):
        raise ValueError(f"num_requests 必须是正整数，收到 {num_requests!r}")
    _check_range("input_len", input_len)
    _check_range("output_len", output_len)
    if not (isinstance(vocab_size, int) and vocab_size >= 1):
        raise ValueError(f"vocab_size 必须是正整数，收到 {vocab_size!r}")
    if not (isinstance(shared_prefix, int) and shared_prefix >= 0):
        raise ValueError(f"shared_prefix 必须是不小于 0 的整数，收到 {shared_prefix!r}")
    rng = random.Random(seed)
    prefix = [rng.randrange(vocab_size) for _ in range(shared_prefix)]
    requests = []
    for _ in range(num_requests):
        prompt = prefix + [rng.randrange(vocab_size) for _ in range(rng.randint(*input_len))]
        requests.append(BenchRequest(prompt, rng.randint(*output_len)))
    return requests
