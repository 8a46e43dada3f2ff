"""多轮对话的首个 token 时间：同一段对话在 shell 里跑，radix 缓存和 naive（不缓存）交替着问。

    python examples/ch15_multiturn.py            # 两分钟上下：3 组服务器，每组各聊 6 轮

shell 每一轮把整段历史发出去，第 n 轮的提示 = 前 n-1 轮的问答 + 新问题。radix 缓存命中前面
那一大段，只算新的几十个 token；naive 每轮从头算整段提示。

怎么测才公平：每组同时起一个 radix、一个 naive 的 shell（`python -m minisgl --shell-mode`），
每一轮两边紧挨着问（每组换一下谁先问），机器忙闲对两边的影响差不多；一共 3 组，每轮取 3 次里最快的。
shell 每轮结束打印 "[首个 token … 秒 · … 个 token · 共 … 秒 · 提示 … 个 token]"。

每轮真正算了多少个提示 token，读调度器自己的日志：它每次空闲时记一行“前缀缓存 N”（页数，
这里一页一个 token）。一轮结束时，提示里没命中的部分和生成的 token 都进了缓存，所以
    本轮算了的提示 token = 缓存新增的 token − 本轮生成的 token。
naive 什么都不缓存（前缀缓存始终是 0），每轮算整段提示。
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
    ARTICLE + "Answer each of my questions in a few words. When does the library open on Saturdays?",
    "How many books can a member borrow?",
    "How much does a late book cost per day?",
    "Where is the children's room?",
    "Is the library open on Sundays?",
    "What does the cafe sell?",
]
CACHES = ("radix", "naive")
ROUNDS = 3  # 每轮取 3 次里最快的
STATS = re.compile(r"\[首个 token ([\d.]+) 秒 · (\d+) 个 token · 共 ([\d.]+) 秒 · 提示 (\d+) 个 token\]")
BANNER = re.compile(r"^mini-sglang shell · ")
IDLE = re.compile(r"调度器空闲：KV 页核对通过（空闲 \d+ \+ 前缀缓存 (\d+) = 总数 \d+）")


class Shell:
    """一个 shell 模式的服务器子进程；stdout 和子进程的日志（stderr）合在一起逐行读。"""

    def __init__(self, cache_type: str) -> None:
        from minibook.models import default_model

        # 打开 INFO 日志：调度器每次空闲时记下前缀缓存有多少页（shell 模式默认只留警告）
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
               "MINISGL_LOG_LEVEL": "INFO"}
        cmd = [sys.executable, "-m", "minisgl", "--shell-mode", "--model-path", str(default_model()),
               "--cache-type", cache_type, "--num-pages", "4096", "--page-size", "1"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env, bufsize=1)
        # 等到 shell 打出欢迎行（tokenizer 进程也就绪了）再问，免得另一边还在启动、抢着 CPU；
        # 调度器就绪前空闲过一次：此时缓存为 0
        self.cached = self._read_until(BANNER)[1]

    def _read_until(self, pattern: re.Pattern) -> tuple[re.Match, int]:
        """读到 pattern 和调度器的一行空闲日志（两者先后不定）为止；返回匹配和缓存的页数。"""
        found, cached, tail = None, None, []
        while cached is None or found is None:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("shell 提前退出了：\n" + "".join(tail[-30:]))
            tail.append(line)
            found = found or pattern.search(line)
            if (m := IDLE.search(line)):
                cached = int(m.group(1))
        return found, cached

    def ask(self, question: str) -> tuple[float, int, int, int]:
        """问一轮；返回 (首个 token 秒数, 提示 token, 生成 token, 真正算了的提示 token)。"""
        before = self.cached
        self.proc.stdin.write(question + "\n")
        self.proc.stdin.flush()
        found, self.cached = self._read_until(STATS)
        ttft, generated, prompt = float(found.group(1)), int(found.group(2)), int(found.group(4))
        if self.cached > before:  # radix：没命中的提示和生成的 token 都进了缓存
            computed = self.cached - before - generated
        else:  # naive：什么都不缓存，没有可命中的
            assert before == self.cached == 0
            computed = prompt
        return ttft, prompt, generated, computed

    def close(self) -> None:
        self.proc.stdin.write("/exit\n")
        self.proc.stdin.close()
        self.proc.stdout.read()
        if self.proc.wait(timeout=60) != 0:
            raise RuntimeError(f"shell 退出码 {self.proc.returncode}")


def main() -> None:
    # runs[cache][round][turn] = (首个 token 秒数, 提示, 生成, 算了的提示)
    runs: dict[str, list[list[tuple[float, int, int, int]]]] = {c: [] for c in CACHES}
    for r in range(ROUNDS):
        order = CACHES if r % 2 == 0 else CACHES[::-1]  # 每一遍换一下谁先问
        shells = {c: Shell(c) for c in order}
        try:
            for c in CACHES:
                runs[c].append([])
            for question in QUESTIONS:
                for c in order:  # 同一轮两边紧挨着问
                    runs[c][-1].append(shells[c].ask(question))
        finally:
            for shell in shells.values():
                if shell.proc.poll() is None:
                    shell.close()
    print(f"同一段 6 轮对话（SmolLM2，贪心，OMP_NUM_THREADS=1），radix 和 naive 交替着问 {ROUNDS} 遍，"
          f"首个 token 时间取最快的一次：")
    print(f"{'轮':>2}  {'提示':>5}  {'radix 算了':>9}  {'naive 算了':>9}  {'radix':>7}  {'naive':>7}  naive/radix")
    for turn in range(len(QUESTIONS)):
        per = {c: [runs[c][r][turn] for r in range(ROUNDS)] for c in CACHES}
        rows = [one[1:] for c in CACHES for one in per[c]]
        assert all(row[:2] == rows[0][:2] for row in rows), "两种缓存、每一遍的对话应当一模一样（贪心）"
        for c in CACHES:
            assert len({one[3] for one in per[c]}) == 1, f"{c} 每一遍算的 token 数应当相同"
        best = {c: min(one[0] for one in per[c]) for c in CACHES}
        prompt = per["radix"][0][1]
        print(f"{turn + 1:>2}  {prompt:>6}  {per['radix'][0][3]:>11}  {per['naive'][0][3]:>11}  "
              f"{best['radix']:>6.2f}s  {best['naive']:>6.2f}s  {best['naive'] / best['radix']:>10.1f}x")
    later = {c: sum(min(runs[c][r][t][0] for r in range(ROUNDS)) for t in range(1, len(QUESTIONS)))
             for c in CACHES}
    print(f"第 2–6 轮首个 token 合计：radix {later['radix']:.2f} 秒，naive {later['naive']:.2f} 秒")


if __name__ == "__main__":
    main()
