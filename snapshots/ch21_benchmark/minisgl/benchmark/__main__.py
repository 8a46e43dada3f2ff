"""命令行：按泊松过程向一个正在跑的 mini-sglang 服务器发随机请求，打印 TTFT、TPOT、ITL 和吞吐。"""

from __future__ import annotations

import argparse
import sys

import httpx

from minisgl.utils.hf import load_tokenizer

from .client import run_online, summarize
from .workload import random_workload


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minisgl.benchmark",
                                     description="按泊松过程向一个正在跑的 mini-sglang 服务器发随机请求，报告 TTFT、TPOT、ITL 和吞吐")
    parser.add_argument("--url", required=True, help="服务器地址，例如 http://127.0.0.1:1919")
    parser.add_argument("--tokenizer", required=True, help="模型目录：用它的分词器把随机 token 变成提示文字")
    parser.add_argument("--num-requests", type=int, default=32)
    parser.add_argument("--rate", type=float, default=float("inf"), help="每秒几个请求（默认 inf：一次全发）")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--input-len", type=int, nargs=2, default=(100, 400), metavar=("最小", "最大"))
    parser.add_argument("--output-len", type=int, nargs=2, default=(50, 200), metavar=("最小", "最大"))
    args = parser.parse_args(argv)
    try:
        tokenizer = load_tokenizer(args.tokenizer)
        workload = random_workload(args.num_requests, args.seed, tuple(args.input_len), tuple(args.output_len),
                                   vocab_size=min(10000, len(tokenizer)))
        requests = [(tokenizer.decode(r.prompt_ids), r.max_tokens) for r in workload]
        summary = summarize(run_online(args.url, requests, args.rate, args.seed))
    except (ValueError, RuntimeError, OSError, httpx.HTTPError) as e:
        print(f"压测失败：{e}", file=sys.stderr)
        return 1
    for key, value in summary.items():
        print(f"{key:<16} {value:.2f}" if isinstance(value, float) else f"{key:<16} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
