# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 阶段一 · 算得对
#
# 这一阶段搭出引擎“算”的那一半：核心数据结构、算子层、模型与权重加载、KV 池和页表、注意力后端、Engine 与采样器。这一页是一次验收，不是新的一章：下面的数字都是在第 6 章的树里真实跑出来的，页末的检查清单列出命令，你在自己的机器上逐条跑过、对上结果，就可以进入阶段二。
#
# <!-- minibook:chapters -->

# %% tags=["remove-cell"]
from minibook.page import *
setup(6)

# %% [markdown]
# ## 这一阶段造了什么
#
# 每章在 `minisgl` 包里新建、修改了几个文件，由各章的快照算出；测试数是在第 6 章的树里收集到的、各章测试文件里的测试。

# %% tags=["remove-input"]
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from IPython.display import Markdown
from minibook import chapters as C
from minibook import practice

collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
                           capture_output=True, text=True, check=True).stdout
tests_per_file = Counter(line.split("::")[0] for line in collected.splitlines() if "::" in line)
stage = [ch for ch in C.written_chapters() if ch.number <= 6]
rows = ["| 章 | 内容 | `minisgl` 里新建 | 修改 | 提前引入 | 本章的测试 |", "| --- | --- | ---: | ---: | ---: | ---: |"]
for ch in stage:
    chg = C.changes(ch.number)
    rows.append(f"| 第 {ch.number} 章 | {ch.title} | {chg.count('new')} | {chg.count('changed')} "
                f"| {chg.count('early')} | {tests_per_file[ch.test_file]} |")
tree = chapter_dir()
package = sorted((tree / "minisgl").rglob("*.py"))
code_lines = sum(1 for p in package for line in p.read_text(encoding="utf-8").splitlines() if line.strip())
total_tests = sum(tests_per_file.values())
stage_exercises = [ex for ex in practice.exercises() if ex.chapter <= 6]
rows.append(f"\n到第 6 章为止：`minisgl` 包里 {len(package)} 个文件、{code_lines:,} 行非空代码；"
            f"测试 {total_tests} 个；判题练习 {len(stage_exercises)} 道。")
assert len(package) == C.changes(6).count() and total_tests > 0
Markdown("\n".join(rows))

# %% [markdown]
# ## 端到端：8 个请求一起生成，与 Hugging Face 逐 token 一致
#
# 用本阶段的全部零件跑一次：第 6 章的 Engine（SmolLM2，float32，页大小 4），由第 6 章 main 里的迷你调度器驱动。8 个提示长短不一、各自最多生成 2 到 16 个 token，一起 prefill，之后每步 decode 还没生成满的请求；每个请求的输出都与 Hugging Face 的贪心生成逐 token 比较（代码在 `chapters/milestones/stage1.py`）。

# %% tags=["remove-input"]
import time

sys.path.insert(0, "examples")
import torch
from ch06_engine import MiniScheduler
from minibook.hf import decode, encode, hf_greedy
from minibook.models import smollm2
from minisgl.core import SamplingParams
from minisgl.engine import Engine, EngineConfig

path = smollm2()
texts = ["The capital of France is", "Once upon a time,", "def fibonacci(n):", "Water boils at",
         "The three primary colors are", "import numpy as np\n", "My favourite fruit is", "1, 2, 3, 4,"]
max_tokens = [16, 8, 12, 4, 10, 6, 14, 2]
engine = Engine(EngineConfig(model_path=path, max_running_req=8, page_size=4,
                             num_page_override=64, max_seq_len_override=64))
sched = MiniScheduler(engine)
peak = 0
alloc = sched.allocator.alloc_slots


def alloc_and_watch(reqs):  # 记下每一步分配之后用了几页
    global peak
    out_loc = alloc(reqs)
    peak = max(peak, sched.allocator.num_used_pages)
    return out_loc


sched.allocator.alloc_slots = alloc_and_watch
prompts = [encode(path, t) for t in texts]
started = time.perf_counter()
outputs, sizes = sched.generate(prompts, [SamplingParams(max_tokens=n) for n in max_tokens])
elapsed = time.perf_counter() - started
same = [out == hf_greedy(path, p, n) for p, out, n in zip(prompts, outputs, max_tokens)]

rows = ["| 提示 | 提示 token | 生成 | 输出 | 与 HF 一致 |", "| --- | ---: | ---: | --- | :---: |"]
for text, p, out, ok in zip(texts, prompts, outputs, same):
    shown = decode(path, out).replace("\n", "⏎").replace("|", "\\|")
    rows.append(f"| `{text.strip()}` | {len(p)} | {len(out)} | {shown} | {'✓' if ok else '✗'} |")
generated = sum(len(o) for o in outputs)
rows.append(f"\n共 {len(sizes)} 步（1 步 prefill + {len(sizes) - 1} 步 decode），每步的批大小 {sizes}；"
            f"生成 {generated} 个 token，提示共 {sum(map(len, prompts))} 个 token。"
            f"KV 池 {engine.num_pages} 页 × 4 token，最多同时用了 {peak} 页；结束后空闲 "
            f"{sched.allocator.num_free_pages} / {engine.num_pages} 页，页表的行空闲 "
            f"{sched.table.available_size} / 8。")
assert all(same) and sched.allocator.num_free_pages == engine.num_pages and sched.table.available_size == 8
engine.shutdown()
Markdown("\n".join(rows))

# %% [markdown]
# 批一步比一步小：生成 2 个 token 的请求在第 2 步后离开，16 个的一直跑到最后。空出的行和页在阶段一里只是闲着——把新请求塞进去，是阶段二的第一件事。

# %% tags=["remove-input"]
# NBVAL_IGNORE_OUTPUT
print(f"这台机器上：{elapsed:.1f} 秒，{generated / elapsed:.1f} token/s（{torch.get_num_threads()} 个线程；随机器而变）")

# %% [markdown]
# ## 检查清单
#
# 在仓库根目录逐条运行，结果对上就打个勾。“应当看到”一栏里的数字是这一页执行时从同一棵树里数出来的。

# %% tags=["remove-input"]
main = subprocess.run([sys.executable, "examples/ch06_engine.py"], capture_output=True, text=True, check=True).stdout
agree = main.count("与 HF 一致：True")
free_line = re.search(r"结束后空闲页：(\d+) / (\d+)", main)
checks = [
    ("python tools/steps.py check 0-6", f"第 0–6 章逐章搭树、跑 main 和测试，全部通过（第 6 章的树里共 {total_tests} 个测试）"),
    ("python tools/steps.py run 6 -- python examples/ch06_engine.py",
     f"{agree} 行“与 HF 一致：True”，结束后空闲页 {free_line.group(1)} / {free_line.group(2)}，页不够的一批什么都不改"),
    ("python tools/steps.py run 6 -- python -m pytest -q tests",
     f"{total_tests} 个测试，没有 failed（没有 GPU 时，只在 CUDA 上跑的几个是 skipped）"),
    ("python tools/steps.py run 6 -- python examples/gpu_smoke.py", "没有 GPU：说明原因并跳过；有 GPU：全部通过"),
    ("python practice/judge.py list", f"阶段一的 {len(stage_exercises)} 道题（第 {stage_exercises[0].number}–{stage_exercises[-1].number} 题），逐道 start / test 做到通过"),
]
rows = ["| ☐ | 命令 | 应当看到 |", "| :---: | --- | --- |"]
rows += [f"| ☐ | `{cmd}` | {expect} |" for cmd, expect in checks]
assert agree == 8 and free_line.group(1) == free_line.group(2)
Markdown("\n".join(rows))

# %% [markdown]
# 全部打勾之后，你手里有一个能把任意一批请求算对的引擎，但每个例子都还要自己拼批、自己还页。阶段二把这些交给调度器。
