"""第 9 章的计时演示（不是测试）：SmolLM2 上，naive 和 radix 两种前缀缓存的首 token 时间（TTFT）。

两个场景，请求都一个接一个地来（前一个结束了才来下一个，像聊天服务里陆续到达的用户）：

1. 同一段约 200 token 的系统提示 + 8 个不同的问题，每个问题只要 1 个 token：TTFT 就是 prefill；
2. 多轮对话：每一轮的提示 = 之前所有轮的提示和回答 + 这一轮的新消息，每轮回答 16 个 token。

时间随机器而变，只有同一次运行里两列的对比有意义。输出是 Markdown 表格。用法：
    python examples/ch09_ttft.py [--turns 6]
"""

from __future__ import annotations

import argparse
import random

from ch09_radix_cache import QUESTIONS, MeteredLLM, chat
from minisgl.core import SamplingParams


def shared_prompt(path, cache_type: str) -> list[tuple[int, int, float]]:
    """[(命中, 计算, TTFT 秒)]，每个问题一项。"""
    from minibook.hf import encode

    llm = MeteredLLM(path, cache_type=cache_type, max_running_req=4, num_page_override=2048,
                     max_seq_len_override=1024)
    llm.generate([encode(path, "Hello")], SamplingParams(max_tokens=1))  # 热身：第一次前向较慢
    rows = []
    for question in QUESTIONS:
        llm.generate([encode(path, chat(question))], SamplingParams(max_tokens=1))
        uid = llm.next_uid - 1
        rows.append((*llm.prefill_of(uid), llm.ttft[uid]))
    llm.shutdown()
    return rows


def multi_turn(path, cache_type: str, turns: int) -> list[tuple[int, int, int, float]]:
    """[(提示长度, 命中, 计算, TTFT 秒)]，每轮一项。每轮的新消息是 48 个随机 token（固定种子）。"""
    rng = random.Random(0)
    llm = MeteredLLM(path, cache_type=cache_type, max_running_req=4, num_page_override=2048,
                     max_seq_len_override=1024)
    llm.generate([[rng.randrange(1000, 20000)]], SamplingParams(max_tokens=1))  # 热身
    history: list[int] = []
    rows = []
    for _ in range(turns):
        history = history + [rng.randrange(1000, 20000) for _ in range(48)]
        out = llm.generate([history], SamplingParams(max_tokens=16, ignore_eos=True))[0]
        uid = llm.next_uid - 1
        rows.append((len(history), *llm.prefill_of(uid), llm.ttft[uid]))
        history = history + out["token_ids"]
    llm.shutdown()
    return rows


def main() -> None:
    from minibook.models import default_model

    parser = argparse.ArgumentParser(description="naive 与 radix 的首 token 时间")
    parser.add_argument("--turns", type=int, default=6, help="多轮对话的轮数")
    args = parser.parse_args()
    path = default_model()

    naive, radix = shared_prompt(path, "naive"), shared_prompt(path, "radix")
    print(f"**场景 1：{path.name}，系统提示 + 8 个问题，一个接一个**\n")
    print("| 问题 | naive 计算 | naive TTFT | radix 命中 | radix 计算 | radix TTFT |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for i, (n, r) in enumerate(zip(naive, radix)):
        print(f"| {i} | {n[1]} | {n[2] * 1000:.0f} ms | {r[0]} | {r[1]} | {r[2] * 1000:.0f} ms |")
    tn, tr = sum(r[2] for r in naive), sum(r[2] for r in radix)
    print(f"\n合计：naive 算了 {sum(r[1] for r in naive)} 个 token、TTFT 之和 {tn:.2f} s；"
          f"radix 算了 {sum(r[1] for r in radix)} 个、{tr:.2f} s（{tn / tr:.1f} 倍）")

    naive, radix = multi_turn(path, "naive", args.turns), multi_turn(path, "radix", args.turns)
    print(f"\n**场景 2：{path.name}，{args.turns} 轮对话，每轮新消息 48 个 token、回答 16 个**\n")
    print("| 轮 | 提示长度 | naive 计算 | naive TTFT | radix 命中 | radix 计算 | radix TTFT |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for i, (n, r) in enumerate(zip(naive, radix)):
        print(f"| {i + 1} | {n[0]} | {n[2]} | {n[3] * 1000:.0f} ms | {r[1]} | {r[2]} | {r[3] * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
