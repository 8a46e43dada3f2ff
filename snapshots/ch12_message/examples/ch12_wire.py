"""第 12 章的测量：一条消息编码成多少字节、编码和解码各要多少微秒，msgpack 对 pickle。

    python examples/ch12_wire.py

两种格式都从消息对象出发、回到消息对象：
- msgpack：encoder(消息) → 字典 → msgpack.packb；msgpack.unpackb → decoder(字典) → 消息；
- pickle：pickle.dumps(消息) / pickle.loads(字节)，张量走 torch 自己的 pickle 支持。
时间取多次重复的中位数，随机器而变；字节数是确定的。
"""

from __future__ import annotations

import pickle
import statistics
import time
from typing import Callable

import torch

from minisgl.core import SamplingParams
from minisgl.message import BaseBackendMsg, BaseTokenizerMsg, BatchTokenizerMsg, DetokenizeMsg, UserMsg
from minisgl.utils.mp import pack, unpack

PROMPT_LENS = [16, 256, 4096, 32768]
BATCH_SIZES = [1, 32, 256]


def user_msg(prompt_len: int) -> UserMsg:
    ids = torch.randint(0, 150_000, (prompt_len,), generator=torch.Generator().manual_seed(prompt_len),
                        dtype=torch.int32)
    return UserMsg(uid=12345, input_ids=ids, sampling_params=SamplingParams(max_tokens=256))


def detokenize_batch(size: int) -> BatchTokenizerMsg:
    return BatchTokenizerMsg(data=[DetokenizeMsg(uid=1000 + i, next_token=30_000 + i, finished=i % 7 == 0)
                                   for i in range(size)])


def median_us(fn: Callable[[], object], budget_s: float = 0.05) -> float:
    """fn 一次的耗时（微秒）：每轮重复到约 5 ms，取 budget 时间内各轮的中位数。"""
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    repeat = max(1, int(0.005 / once))
    rounds: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(rounds) < 3 or (time.perf_counter() < deadline and len(rounds) < 50):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        rounds.append((time.perf_counter() - start) / repeat * 1e6)
    return statistics.median(rounds)


def measure(msg, base) -> dict[str, dict[str, float]]:
    """一条消息在两种格式下的字节数与编码、解码时间；顺便确认两种都能原样还原。"""
    raw_mp = pack(base.encoder, msg)
    raw_pk = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    for back in (unpack(base.decoder, raw_mp), pickle.loads(raw_pk)):
        assert type(back) is type(msg)
    return {
        "msgpack": {"字节": len(raw_mp), "编码": median_us(lambda: pack(base.encoder, msg)),
                    "解码": median_us(lambda: unpack(base.decoder, raw_mp))},
        "pickle": {"字节": len(raw_pk),
                   "编码": median_us(lambda: pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)),
                   "解码": median_us(lambda: pickle.loads(raw_pk))},
    }


def wire_table() -> list[tuple[str, dict]]:
    rows = [(f"UserMsg，提示 {n} 个 token", measure(user_msg(n), BaseBackendMsg)) for n in PROMPT_LENS]
    rows += [(f"{k} 条 DetokenizeMsg 一帧", measure(detokenize_batch(k), BaseTokenizerMsg))
             for k in BATCH_SIZES]
    return rows


def print_table(rows: list[tuple[str, dict]]) -> None:
    print(f"{'消息':<24}{'msgpack 字节':>12}{'pickle 字节':>12}   {'编码 μs（mp / pk）':>18}"
          f"   {'解码 μs（mp / pk）':>18}")
    for name, r in rows:
        m, p = r["msgpack"], r["pickle"]
        pad = 24 - sum(2 if ord(c) > 0x2000 else 1 for c in name) + len(name)
        print(f"{name:<{pad}}{m['字节']:>12}{p['字节']:>12}   {m['编码']:>8.1f} / {p['编码']:<8.1f}"
              f"   {m['解码']:>8.1f} / {p['解码']:<8.1f}")


if __name__ == "__main__":
    print_table(wire_table())
