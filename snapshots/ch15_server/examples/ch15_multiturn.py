"""多轮对话的首个 token 时间：同一段对话在 shell 里跑两遍，radix 缓存和 naive（不缓存）各一遍。

    python examples/ch15_multiturn.py            # 几分钟：起两次服务器，各聊 6 轮

shell 每一轮把整段历史发出去，第 n 轮的提示 = 前 n-1 轮的问答 + 新问题。radix 缓存命中前面
那一大段，只算新的几十个 token；naive 每轮从头算整段提示。脚本用管道把问题喂给
`python -m minisgl --shell-mode`，读 shell 每轮结束时打印的 "[首个 token … 秒 · … · 提示 … 个 token]"。
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

# 第一轮贴一段长文字（提示一下子就有几百个 token），之后是几句短的追问
ARTICLE = (
    "Read this note and answer my questions about it. "
    "The city library opens at nine in the morning and closes at six in the evening on weekdays. "
    "On Saturdays it opens at ten and closes at four, and it is closed on Sundays. "
    "Members can borrow up to eight books at a time for three weeks. "
    "Late books cost twenty cents per day, up to a limit of five dollars per book. "
    "The children's room is on the second floor, next to the study rooms, which can be booked "
    "for two hours at a time. The cafe on the ground floor sells tea, coffee and sandwiches. "
) * 3
QUESTIONS = [
    ARTICLE + "When does the library open on Saturdays?",
    "How many books can a member borrow?",
    "How much does a late book cost per day?",
    "Where is the children's room?",
    "Is the library open on Sundays?",
    "What does the cafe sell?",
]
STATS = re.compile(r"\[首个 token ([\d.]+) 秒 · (\d+) 个 token · 共 ([\d.]+) 秒 · 提示 (\d+) 个 token\]")


def chat(cache_type: str) -> list[tuple[float, int, int]]:
    """起一个 shell 模式的服务器，把问题一行行喂进去；返回每轮的 (首个 token 秒数, 提示长度, 回答长度)。"""
    from minibook.models import default_model

    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    cmd = [sys.executable, "-m", "minisgl", "--shell-mode", "--model-path", str(default_model()),
           "--cache-type", cache_type, "--num-pages", "4096"]
    feed = "".join(q + "\n" for q in QUESTIONS) + "/exit\n"
    proc = subprocess.run(cmd, input=feed, capture_output=True, text=True, timeout=900, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"shell 失败（{proc.returncode}）：\n{proc.stderr[-2000:]}")
    turns = [(float(t), int(prompt), int(n)) for t, n, _, prompt in STATS.findall(proc.stdout)]
    assert len(turns) == len(QUESTIONS), proc.stdout[-2000:]
    return turns


def main() -> None:
    results = {cache: chat(cache) for cache in ("radix", "naive")}
    print("同一段 6 轮对话（SmolLM2，贪心，OMP_NUM_THREADS=1），每轮的首个 token 时间：")
    print(f"{'轮':>2}  {'提示 token':>10}  {'radix':>8}  {'naive':>8}  {'naive/radix':>11}")
    for i, (r, n) in enumerate(zip(results["radix"], results["naive"]), start=1):
        assert r[1] == n[1] and r[2] == n[2], "两种缓存下对话应当一模一样（贪心）"
        print(f"{i:>2}  {r[1]:>10}  {r[0]:>7.2f}s  {n[0]:>7.2f}s  {n[0] / r[0]:>10.1f}x")
    later = lambda cache: sum(t for t, _, _ in results[cache][1:])  # noqa: E731
    print(f"第 2–6 轮首个 token 合计：radix {later('radix'):.2f} 秒，naive {later('naive'):.2f} 秒")


if __name__ == "__main__":
    main()
