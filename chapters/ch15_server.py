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
# # 第 15 章 API server、启动器与 shell
#
# 前三章备好了零件：ZMQ 上的消息（第 12 章）、tokenizer 进程（第 13 章）、会收发的调度器（第 14 章），这一章把它们装成一个能用官方 `openai` 客户端访问的服务器 `python -m minisgl`。难处在并发：很多请求的回复从同一个地址回来，要按 uid 分给各自的等待者；流式请求要等到第一段回复才发响应头，被拒收时才能回 400；客户端半路走了，取消要一路传到调度器，KV 页当场还回来。本章的运行和测试证明：回复不串、拒收是 400、断开后页一页不少，温度 0 的回答与 Hugging Face 逐 token 相同。

# %% tags=["remove-cell"]
from textwrap import indent

from IPython.display import Markdown

from minibook.page import *
setup(15)


def in_fold(md) -> Markdown:
    """缩进 4 格：接在上一个 markdown 单元开头的 ??? 折叠框里（代码清单、输出都可以）。"""
    return Markdown(indent(md.data if isinstance(md, Markdown) else md, "    "))


def fold_output(text: str) -> Markdown:
    return in_fold(f'```text title="输出"\n{text.rstrip()}\n```')

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 所有回复都从同一个地址回到 API server，怎样交到各自的等待者手里？
# 2. 流式请求为什么要等到第一段回复才发响应头？
# 3. 客户端在流式输出到一半时断开，服务器要做哪两件事？少做一件会怎样？
# 4. `n=4` 的请求，提示的 KV 页占几份？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 每个请求一个 uid 和一个队列，先建队列再发消息；一个收件任务按回复里的 uid 放进对应的队列，找不到队列的回复属于已经放弃的请求，丢掉。
#     2. 状态码在响应头里，发出去就改不了；后端可能拒收（提示太长），等到第一段回复才知道该回 200 还是 400。
#     3. 不再收这个 uid 的回复，并经 tokenizer 进程把取消传给调度器。只做前一件，请求会一直生成到 `max_tokens`，白占着页和算力。
#     4. 一份：先发第 0 个回答，等它的第一段回复（这时提示已经进了 radix 缓存），再发其余 3 个，它们借用这段提示的页。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章新建 `minisgl/server/`：启动器 `launch.py`、API server 和 shell 共用的前端管理器 `frontend.py`、HTTP 接口 `api_server.py`（请求格式 `protocol.py`、错误格式 `errors.py`）、参数 `args.py`、`shell.py`，以及入口 `minisgl/__main__.py`；改第 13 章的 `minisgl/tokenizer/server.py`，让它提前检查提示长度。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch15_server.py`：起 `python -m minisgl`，用官方 `openai` 客户端发流式和非流式的 chat、一个 completions 和一个坏请求，再用 SIGTERM 关掉它，检查子进程都退出了；`python tools/steps.py check 15` 会跑它和本章的测试。自己起一个：
#
# ```bash
# python tools/steps.py run 15 -- python -m minisgl --port 1919          # 不给 --model-path 就用内置的 SmolLM2
# curl http://127.0.0.1:1919/v1/chat/completions -H 'content-type: application/json' \
#      -d '{"messages": [{"role": "user", "content": "What is the capital of France?"}], "temperature": 0}'
# python tools/steps.py run 15 -- python -m minisgl --shell-mode          # 终端里多轮对话
# ```
#
# 一个流式请求走过的进程（编号是先后）：
#
# ![一个流式请求走过的三类进程：API server、tokenizer 进程、调度器；回复沿原路回来，客户端断开时取消也沿原路传到调度器](../assets/ch15_request_journey.svg)
#
# ## 先量：流式让第一块文字早到多少
#
# 页面起一个服务器（main 里的 `ServerProcess`：在子进程里跑 `python -m minisgl`），同一个问题生成同样 64 个 token，非流式等整段回答，流式看第一块文字什么时候到（[首 token 时间](../glossary.md#ttft)，TTFT）：

# %%
import sys

sys.path.insert(0, "examples")
from ch15_server import ServerProcess  # noqa: E402

from minibook.models import default_model  # noqa: E402

MODEL = default_model()
server = ServerProcess("--model-path", str(MODEL), "--num-pages", "2048", "--max-running-requests", "16")
print("服务器就绪：", sorted(line.split(": ", 1)[-1] for line in server.log().splitlines() if "就绪" in line))

# %% tags=["milestone"]
# NBVAL_IGNORE_OUTPUT
import json
import time

import httpx

STORY = [{"role": "user", "content": "Write a short story about a robot who learns to paint."}]


def timed(stream: bool, max_tokens: int = 64) -> tuple[float, float]:
    """返回 (第一块文字到达的秒数, 全部到达的秒数)。"""
    body = {"messages": STORY, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": stream}
    start, first = time.perf_counter(), None
    if not stream:
        httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120).raise_for_status()
        done = time.perf_counter() - start
        return done, done
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=120) as r:
        for line in r.iter_lines():
            if first is None and line.startswith("data: {") and json.loads(line[6:])["choices"][0]["delta"].get("content"):
                first = time.perf_counter() - start
    return first, time.perf_counter() - start


runs = {mode: timed(mode == "流式") for mode in ("非流式", "流式")}
for mode, (first, done) in runs.items():
    print(f"{mode}：第一块文字 {first:.2f} 秒，全部 {done:.2f} 秒")
ttft, total = runs["流式"][0], runs["非流式"][1]
assert ttft < total / 10, (ttft, total)
print(f"流式的第一块文字早到 {total - ttft:.2f} 秒（{total / ttft:.0f} 倍）")

# %% [markdown]
# 两种方式算的 token 一样多，总时间相近；流式的第一块文字在 prefill 之后就到，早了一个数量级以上，非流式要等全部 64 个 token。所以聊天界面都用流式，而流式带来本章的两个问题：响应头什么时候发，客户端半路走了怎么办。
#
# ## 三类进程，只用 ZMQ 说话
#
# 主进程里的 API server 只管 HTTP 和记账，tokenizer 进程在文字和 token 之间来回转换，调度器（每个 TP rank 一个）只管算；它们之间只用第 12 章的 ZMQ 队列传消息，[IPC 地址](../glossary.md#ipc-address)在每个服务器自己的临时目录里。启动器拉起子进程，等每一个报[就绪](../glossary.md#ready-ack)，才开始回答 HTTP 请求：

# %% tags=["remove-input"]
listing("minisgl/server/launch.py", "Backend.start")

# %% [markdown]
# 调度器报就绪时带上 `max_seq_len`，启动器转给 tokenizer 进程，它据此提前检查提示长度。
#
# ??? note "深入：为什么用 spawn，为什么等就绪，端口为什么先占住"
#
#     `fork` 复制整个进程，连别的线程持有的锁（torch 的线程池、日志模块的锁）一起复制，子进程里这些锁可能永远不会被释放；CUDA 也不能在 fork 出来的子进程里重新初始化。`spawn` 慢一些（每个子进程重新 import torch），但干净。等就绪是因为 ZMQ 的 connect 在对方 bind 之前也会成功，消息先排着：API server 要是一启动就接请求，请求会在一个还没加载完模型的调度器门口排几十秒，客户端却以为服务器好了。等的时候每 0.2 秒看一眼子进程还在不在：模型路径写错、内存不够，调度器一启动就退出，启动器立刻报出是谁、退出码多少，而不是干等到超时。端口倒是在加载模型之前就占住了（bind 加 listen，之后交给 uvicorn），免得加载的几十秒里被别的程序占走；这期间连进来的请求排着队，就绪后照常得到回答，所以判断就绪要看 `/v1/models` 有没有回答，而不是端口能不能连上。

# %% tags=["remove-input"]
in_fold(listing("minisgl/server/launch.py", "Backend._wait_ready"))

# %% [markdown]
# ## 回复按 uid 回到各自的队列
#
# API server 跑在一个 asyncio 事件循环里，同时服务很多请求，而所有回复都从同一个 "frontend" 地址回来。`FrontendManager` 给每个请求编一个 uid、建一个队列，一个后台任务不停地收、按 uid 分发，每个等待者只从自己的队列里取：

# %% tags=["remove-input"]
listing("minisgl/server/frontend.py", "FrontendManager.submit")

# %% tags=["remove-input"]
listing("minisgl/server/frontend.py", "FrontendManager._listen")

# %% tags=["remove-input"]
listing("minisgl/server/frontend.py", "FrontendManager.next_reply")

# %% [markdown]
# 先建队列再发消息，回复就不会比队列先到；收件任务一出错就再也收不到任何回复，所以它让所有等待者立刻失败。8 个问题先一个一个地问，再同时问：

# %%
from concurrent.futures import ThreadPoolExecutor

COUNTRIES = ["France", "Spain", "Italy", "Germany", "Japan", "Egypt", "Canada", "Greece"]


def ask(country: str) -> str:
    body = {"prompt": f"The capital of {country} is", "max_tokens": 4, "temperature": 0}
    return httpx.post(server.url + "/v1/completions", json=body, timeout=120).json()["choices"][0]["text"]


alone = [ask(c) for c in COUNTRIES]
with ThreadPoolExecutor(len(COUNTRIES)) as pool:
    together = list(pool.map(ask, COUNTRIES))
for country, a, t in zip(COUNTRIES, alone, together):
    print(f"{country:<8} 同时问：{t!r:<18} 和单独问相同：{a == t}")
assert together == alone and len(set(together)) == len(COUNTRIES)

# %% [markdown]
# 8 个答案各不相同；同时问时，8 个请求的回复从同一个地址交错着回来，靠 uid 各自归队，每个请求拿到的仍是单独问时的答案。
#
# ## 流式也先等第一段回复
#
# 两个接口共用 `_generate`：把 OpenAI 的参数变成 `SamplingParams`，发出请求，**先等第一段回复**，再决定回什么：

# %% tags=["remove-input"]
listing("minisgl/server/api_server.py", "_generate")

# %% [markdown]
# 状态码在响应头里，头一发出去就改不了，而后端可能拒收这个请求：提示太长由 tokenizer 进程拒收，其余的由调度器（第 14 章的 `RejectMsg`）。等到第一段再发头，拒收就是一个正常的 400，`stream: true` 也一样：

# %%
long_prompt = {"messages": [{"role": "user", "content": "hello " * 3000}], "stream": True}
r = httpx.post(server.url + "/v1/chat/completions", json=long_prompt, timeout=60)
error = r.json()["error"]
print(r.status_code, error["code"], error["param"], error["message"])
assert r.status_code == 400 and error["code"] == "context_length_exceeded"

# %% [markdown]
# 流式客户端等的第一样东西本来就是第一段回复，所以这一等不让它多等。
#
# ??? note "深入：提示长度在哪里检查，错误怎样跨进程（413、数字符、截 max_tokens）"
#
#     规则和上游一样：提示本身占满 `max_seq_len` 才拒收；`max_tokens` 超过剩下的空间就截到剩下的空间，生成到那里 `finish_reason` 是 `"length"`；chat 不给 `max_tokens` 时就是“能生成多少生成多少”。这些在 tokenizer 进程里做，因为只有它知道提示有多少个 token（下面的 `_fit_max_tokens`）。
#
#     还有两道更早的关。一个 10 MB 的请求体要解析、分词十几秒，而 tokenizer 进程只有一个，这段时间里别的请求的反分词都得等着：所以请求体超过 4 MiB 直接回 413（`BodySizeLimit`，一个 ASGI 中间件，不读完就拒绝）。没超过的，tokenizer 进程先数字符（`TokenizerHandler._check_chars`）：超过 `max_seq_len` × 最长 token 的字符数（SmolLM2 约 80），分词后一定放不下，不分词就拒收；超过 `max_seq_len` × 8 时先只分每段开头的一截（截在空白处），token 已经太多就不分剩下的。上面的输出就是这一关拒收的。
#
#     错误跨进程时带的是错误码，不是让对方去解析的一句中文：tokenizer 进程把 `PromptTooLong.code` 写进 `UserReply.error_code`，错误码变成 HTTP 状态、OpenAI 的 `param` 和 `code` 只在 `errors.py` 的 `reply_error` 一处；shell 也认这个错误码，对话太长时去掉最早的一轮再问。

# %% tags=["remove-input"]
in_fold(listing("minisgl/tokenizer/server.py", "TokenizerHandler._fit_max_tokens"))

# %% tags=["remove-input"]
in_fold(listing("minisgl/server/errors.py", "reply_error"))

# %% [markdown]
# ## SSE：一行 data，一个空行，最后 [DONE]
#
# 流式响应是 [SSE](../glossary.md#sse)：每段文字写一行 `data: <JSON>` 加一个空行；最后一块带 `finish_reason`，要了 `stream_options.include_usage` 的再多一块用量，最后是 `data: [DONE]`：

# %% tags=["remove-input"]
listing("minisgl/server/api_server.py", "_stream")

# %%
import re

body = {"prompt": "The capital of France is", "max_tokens": 4, "temperature": 0, "stream": True,
        "stream_options": {"include_usage": True}}
with httpx.stream("POST", server.url + "/v1/completions", json=body, timeout=60) as r:
    for line in r.iter_lines():
        line = re.sub(r'"created": \d+', '"created": …', line)  # 时间戳和随机的 id 每次都不同
        print(re.sub(r'cmpl-[0-9a-f]{32}', 'cmpl-…', line) if line else "（空行）")

# %% [markdown]
# 每个生成的 token 一块，文字是 tokenizer 进程[增量反分词](../glossary.md#incremental-detokenization)的结果（第 13 章）。生成停在 `max_tokens`，所以 `finish_reason` 是 `"length"`；用量块里提示 5 个 token、生成 4 个。
#
# ??? note "深入：坏请求一律 400，而且像 OpenAI"
#
#     请求体由 pydantic 模型检查，两个设置让它严格：`extra="forbid"`，不认识的字段报错，而不是悄悄忽略一个客户端以为生效了的参数；`strict=True`，`"max_tokens": "10"` 不会被偷偷转成整数。OpenAI 的可选参数写 `null` 等于不写；标准参数里我们不实现的（`echo`、`best_of`、`logit_bias`）只在取“什么都不做”的值时接受。字符串里有编不成 UTF-8 的孤立代理项、整数大得离谱，也在这里变成 400，而不是到了 msgpack 才变成 500。FastAPI 默认把检查失败回成 422 和它自己的格式，`install_error_handlers` 换成 OpenAI 的 400 和 `{"error": {...}}`，官方客户端把它变成 `openai.BadRequestError`。下面 8 个坏请求发给同一个服务器，最后一个正常请求照常是 200：

# %% tags=["remove-input"]
from minibook.cli import ljust  # 按显示宽度补空格：汉字占两列

BAD = {
    "不是 JSON": b'{"messages": [',
    "类型不对": {"messages": STORY, "max_tokens": "ten"},
    "max_tokens 为负": {"messages": STORY, "max_tokens": -5},
    "不认识的字段": {"messages": STORY, "frobnicate": True},
    "messages 为空": {"messages": []},
    "top_k=0": {"messages": STORY, "top_k": 0},
    "惩罚超出范围": {"messages": STORY, "presence_penalty": 3},
    "不支持的参数": {"messages": STORY, "echo": True},
}
rows = []
for name, body in BAD.items():
    kwargs = {"content": body, "headers": {"content-type": "application/json"}} if isinstance(body, bytes) else {"json": body}
    r = httpx.post(server.url + "/v1/chat/completions", timeout=30, **kwargs)
    error = r.json()["error"]
    rows.append(f"{ljust(name, 16)}{r.status_code}  param={error['param']!s:<18}{error['message'][:60]}")
    assert r.status_code == 400 and error["type"] == "invalid_request_error"
ok = httpx.post(server.url + "/v1/chat/completions", json={"messages": STORY, "max_tokens": 3}, timeout=60)
rows.append(f"之后的正常请求：{ok.status_code}")
assert ok.status_code == 200
fold_output("\n".join(rows))

# %% [markdown]
# ## 客户端走了，取消一路传到调度器
#
# 客户端断开时，Starlette 取消正在产生 SSE 的生成器，`_stream` 的 `finally` 发现没有正常结束，就调用 `abort`：不再收这个 uid 的回复，把 `AbortMsg` 发给 tokenizer 进程；tokenizer 进程转成 `AbortBackendMsg` 交给调度器，调度器停下请求、还回 KV 页。

# %% tags=["remove-input"]
listing("minisgl/server/frontend.py", "FrontendManager.abort")

# %% [markdown]
# `abort` 常在刚被取消的协程里调用，那里再 `await` 会被再次取消（Starlette 底下的 anyio 的取消是“持续”的），所以发送交给一个新任务。下面读 5 个事件就断开一个本该生成 900 个 token 的请求，再看服务器的日志：

# %%
# NBVAL_IGNORE_OUTPUT
start = len(server.log())
body = {"messages": STORY, "max_tokens": 900, "temperature": 0, "ignore_eos": True, "stream": True}
with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=60) as r:
    lines = (line for line in r.iter_lines() if line)
    events = [next(lines) for _ in range(5)]


def wait_for_log(pattern: str, after: int, timeout: float = 30) -> int:
    """等日志里 after 之后出现 pattern，返回它结束的位置。"""
    deadline = time.monotonic() + timeout
    while (m := re.search(pattern, server.log()[after:])) is None:
        assert time.monotonic() < deadline, f"{timeout} 秒内日志里没有 {pattern}"
        time.sleep(0.1)
    return after + m.end()


wait_for_log(r"客户端断开，取消请求 \d+", start)
uid = re.search(r"客户端断开，取消请求 (\d+)", server.log()[start:]).group(1)
aborted_at = wait_for_log(rf"请求 {uid} 已取消", start)
checked_at = wait_for_log(r"KV 页核对通过.*", aborted_at)
new_lines = [line.split("INFO ")[-1] for line in server.log()[start:checked_at].splitlines()]
for line in new_lines:
    print(line)
free, cached, total = map(int, re.search(r"KV 页核对通过\D*(\d+)\D+(\d+)\D+(\d+)", new_lines[-1]).groups())
assert free + cached == total

# %% [markdown]
# 第一行来自 API server，后两行来自调度器：它拿掉了这个请求，随即空闲、核对 KV 页，空闲页加前缀缓存的页正好是总页数，断开的请求一页不少地还了回来（它算好的前缀留在 radix 缓存里，可以复用，也可以逐出）。
#
# ## n 个回答：先等第 0 个的第一段回复
#
# `n` 拆成 n 个请求，第 i 个用 `seed + i`。它们的提示相同，`_generate_n` 先发第 0 个、等它的第一段回复，这时提示已经算完、进了 radix 缓存；其余的随后发出，借用这段提示的页，只剩提示末尾的一点要算（测试 `test_n_choices_share_the_prompt_pages` 检查提示的页只占一份）。同一个 seed 再发一次：

# %%
body = {"prompt": "Once upon a time,", "max_tokens": 6, "temperature": 1.0, "seed": 7, "n": 3,
        "logprobs": 2}
first, again = (httpx.post(server.url + "/v1/completions", json=body, timeout=120).json()
                for _ in range(2))
for choice in first["choices"]:
    print(choice["index"], repr(choice["text"]),
          [round(x, 2) for x in choice["logprobs"]["token_logprobs"]])
print("usage：", first["usage"])
same = [c["text"] for c in first["choices"]] == [c["text"] for c in again["choices"]]
print("同一个 seed 再发一次，三个回答都一样：", same)
assert same and len({c["text"] for c in first["choices"]}) > 1

# %% [markdown]
# 三个回答各不相同，再发一次一字不差；`usage` 里提示只算一次，生成的 token 三份相加，和 OpenAI 一样。
#
# ??? note "深入：seed、logprobs、惩罚……每个参数怎么实现，和 OpenAI / vLLM 对齐到哪一步"
#
#     - `seed`：int64 范围内的整数。采样器按 (seed, 第几个生成的 token) 给这一行单独的随机数，和同批的请求、重叠调度都无关（第 6 章）。
#     - `n`（最多 16）：流式时每块的 `choices[0].index` 标明是第几个回答，各回答交错到达。
#     - `logprobs`：原始 logits 的 `log_softmax`（惩罚和温度之前，和 OpenAI、vLLM 一致），测试里与 HF 的 `log_softmax` 比较。chat 写 `logprobs: true` 加 `top_logprobs: k`（k ≤ 20），结果在 `choices[].logprobs.content[]`；completions 写 `logprobs: k`，结果是 `tokens`、`token_logprobs`、`top_logprobs`、`text_offset` 四个并列的列表。token 文字是单独解码这个 token 得到的（和 vLLM 一样，半个汉字的字节 token 是 U+FFFD）。
#     - `presence_penalty` / `frequency_penalty`：[-2, 2]，只数生成的 token（第 6 章）。
#     - `skip_special_tokens`（vLLM 的参数，默认 true）：反分词时去掉 `<|im_end|>` 这类特殊 token。
#     - `store`、`metadata`、`service_tier`、`user`：接受，不影响生成。`model` 可以不写；写了别的名字回 404（`model_not_found`），和 vLLM 一样。
#     - 仍然不支持、非中性值回 400 的：`echo`、`best_of`、`logit_bias`。

# %% tags=["remove-input"]
in_fold(listing("minisgl/server/api_server.py", "_generate_n"))

# %% [markdown]
# ## 后端死了：等待者立刻 503
#
# 子进程会死（OOM killer、一个 bug），请求却还在队列里等一个永远不会来的回复。启动器起一个看守线程，在所有子进程的 sentinel 上等，谁退出就通知 `FrontendManager.backend_died`：每个等待者的队列里放一个“后端没了”的标记，还没开始回复的得到 503，已经在流式输出的收到一个 SSE 的 error 事件：

# %% tags=["remove-input"]
listing("minisgl/server/launch.py", "Backend.watch")

# %%
# NBVAL_IGNORE_OUTPUT
import os
import signal

from ch15_server import children_of, is_alive  # noqa: E402

doomed = ServerProcess("--model-path", str(MODEL), "--num-pages", "512")  # 另起一个，杀掉它的调度器
children = children_of(doomed.proc.pid)
scheduler_pid = int(re.search(r"已启动调度器 rank 0（pid (\d+)）", doomed.log()).group(1))
body = {"messages": STORY, "max_tokens": 400, "temperature": 0, "ignore_eos": True}
with ThreadPoolExecutor(1) as pool:
    waiting = pool.submit(httpx.post, doomed.url + "/v1/chat/completions", json=body, timeout=120)
    time.sleep(0.5)  # 让这个请求进到调度器里
    os.kill(scheduler_pid, signal.SIGKILL)
    killed = time.perf_counter()
    r = waiting.result()
print(f"正在等的请求：{r.status_code}，杀掉调度器之后 {time.perf_counter() - killed:.2f} 秒得到：{r.json()['error']['message']}")
code = doomed.proc.wait(timeout=60)
print(f"服务器退出码 {code}：", [line for line in doomed.log().splitlines() if line.startswith("错误：")])
time.sleep(1)  # multiprocessing 的 resource tracker 稍后才退
print("还活着的子进程：", [pid for pid in children if is_alive(pid)])
doomed.stop()
assert r.status_code == 503 and code == 1

# %% [markdown]
# 等待的请求得到 503 之后，服务器以退出码 1 退出、停掉其余子进程：没有调度器的服务器不可能再生成，退出了，外面的进程管理器（systemd、Kubernetes）才知道要重启它。
#
# ??? note "深入：卡住的后端、/health、停服务、kill -9 之后的收尾"
#
#     - **卡住**：进程还在却不动了（被 SIGSTOP、死锁），sentinel 不会变。`FrontendManager` 另有一个看守：有请求在等、后端 `--watchdog-timeout` 秒（默认 60）一点回复都没有，就当它卡住了，和后端死了一样处理。在跑的请求每一步都有回复，一步 prefill 在服务的默认设置下只算 256 个 token，60 秒留足了余量；把 `--max-prefill-length` 调大很多时，这个时限也要跟着调大。
#     - **/health**：不只看进程在不在，而是发一个只生成 1 个 token 的探测请求（SGLang 也这样），收到回复才回 200；卡住的后端由上面的看守让它得到 503。
#     - **停服务**：第一次 SIGTERM 或 Ctrl-C 不再收新请求，正在生成的请求最多再等 5 秒（`FrontendManager.drain`），到时流式的收到 error 事件、非流式的得到 503；第二次就不再等。uvicorn 自己会无限期地等每个连接关闭，一个长流就能让服务器停不下来。之后启动器 SIGTERM 每个子进程，5 秒内没退的再 SIGKILL，删掉 IPC 临时目录。
#     - **启动器被 kill -9**：它来不及收尾。内核替它给子进程发 SIGTERM（`PR_SET_PDEATHSIG`），子进程还有一个线程盯着父进程；父进程一没，子进程就删掉 IPC 目录、退出。
#     - **一段长提示卡住所有的流**：上游的顺序是 prefill 优先，长提示的各块一块接一块地算，在跑的流要等完整段 prefill。服务器的默认和离线的 `LLM` 不同（`ServerArgs`）：一块 256 个 token，两块之间让在跑的请求 decode 一步（`--no-decode-between-chunks` 换回上游的顺序）；`python examples/ch15_prefill_stall.py [服务器参数]` 量在跑的流最长停多久。2026-12-03 在空闲的 2 核机器上（每个进程 1 个 torch 线程，3 个流、一段 4000 个 token 的提示）量了一次：默认设置下每个流最长停 1.87 秒（长提示来之前一步最长 128 ms），`--no-decode-between-chunks --max-prefill-length 8192`（上游的顺序，不切块）停 26.8 秒，`--no-decode-between-chunks --max-prefill-length 512`（只切块）仍停 19.0 秒。
#
# 回到第一个服务器，用 SIGTERM 关掉它：

# %%
code, left = server.stop()
print(f"退出码 {code}（128 + SIGTERM 的 15），还活着的子进程：{left}")
assert left == []

# %% [markdown]
# ## shell：多轮对话
#
# `--shell-mode` 不开 HTTP 端口，直接用 `FrontendManager` 发请求，边生成边打印。模型不记得上一轮，每一轮都把整段历史发出去，radix 缓存让它只算新的部分。
#
# ??? note "深入：shell 的细节，和 6 轮对话里 radix 与 naive 的首 token 时间"
#
#     终端里用 prompt_toolkit 读输入（能编辑、有历史、命令补全）；输入来自管道时直接读 stdin，所以脚本和测试能驱动它。回答到一半按 Ctrl-C 只取消这一轮（请求被 abort）；对话长到放不进 `max_seq_len` 时，shell 去掉最早的一轮再问（下面的 `ChatSession.ask`）。
#
#     `examples/ch15_multiturn.py` 把同一段 6 轮对话（第一轮贴一段几百 token 的文字）喂给 `--cache-type radix` 和 `--cache-type naive` 的 shell，两边紧挨着问，整段跑 3 遍，首 token 时间每轮取最快的一次。每轮算了多少个提示 token 读调度器自己的日志：一轮结束时，没命中的提示和生成的 token 都进了缓存，缓存新增的 token 减去本轮生成的就是本轮算过的提示 token。下面是构建这一页时的输出（要起 6 次服务器，测试不重跑它；时间因机器而异，“算了”的 token 数与机器无关）：

# %% tags=["remove-input"]
in_fold(listing("minisgl/server/shell.py", "ChatSession.ask"))

# %% tags=["remove-input", "milestone"]
# NBVAL_SKIP
import contextlib
import io

buffer = io.StringIO()
with contextlib.redirect_stdout(buffer):
    run("python examples/ch15_multiturn.py")
fold_output(buffer.getvalue())

# %% [markdown]
#     第 1 轮两边都从头算整段提示；之后 naive 每轮重算越来越长的整段历史，首 token 时间跟着涨，radix 每轮只算新问题和聊天模板补上的几个标记，首 token 时间不随轮数变长。
#
# ## 运行
#
# 本章的 main，先看源码（它用来起服务器的 `ServerProcess` 在后面的折叠框里），再看它在本章的树里真实跑出来的输出：

# %% tags=["remove-input"]
listing("examples/ch15_server.py", "main")

# %% [markdown]
# ??? note "examples/ch15_server.py 里的 ServerProcess：在子进程里起服务器、等就绪、关掉"

# %% tags=["remove-input"]
in_fold(listing("examples/ch15_server.py", "ServerProcess"))

# %%
run("python examples/ch15_server.py")

# %% [markdown]
# 值得注意的地方：
#
# - 就绪时有两个子进程，调度器 rank 0 和 tokenizer 进程；API server 在主进程里。
# - 流式各块拼起来与非流式的回答相同；chat 以 EOS 结束，`finish_reason=stop`，completions 生成满 8 个 token，`finish_reason=length`。
# - 坏请求得到 400 和 OpenAI 格式的错误体；SIGTERM 之后退出码 143（128 + 15），3 个子进程（多出的一个是 multiprocessing 的 resource tracker）都退出了，端口空了出来。
#
# ## 与上游的差异
#
# 上游以固定的提交 20fcd7f 为准。
#
# - 我们的 `stream: false` 回完整的 `chat.completion`（带 `usage` 和真实的 `finish_reason`），上游只会流式输出，因为要整段结果的程序不该自己拼流。`python/minisgl/server/api_server.py` · `FrontendManager.stream_chat_completions`
# - 提示太长时我们在 tokenizer 进程里就回 400，上游的调度器丢掉它、只记一行警告，客户端永远等不到回复，因为客户端该知道为什么。`python/minisgl/scheduler/scheduler.py` · `Scheduler._process_one_msg`
# - 我们的启动器看守子进程，死了或卡住了就让等待者失败、自己退出；上游启动完就不再管子进程，后端死了请求一直挂着，因为挂住的请求比失败更糟。`python/minisgl/server/launch.py` · `launch_server`
# - 我们实现了 `/v1/completions`、`stop`、`seed`、`n`、`logprobs`，不认识的字段回 400；上游没有前两样，忽略不认识的字段，`n` 收下但不生效，因为悄悄忽略会让客户端以为参数生效了。`python/minisgl/server/api_server.py` · `OpenAICompletionRequest`
#
# ## 官方实现
#
# 行号指[上游](../glossary.md#upstream)词条里固定的那个提交。
#
# - 请求体：`python/minisgl/server/api_server.py` · `OpenAICompletionRequest`（第 65～84 行）
# - chat 接口（路由是 `/v1/chat/completions`）：`python/minisgl/server/api_server.py` · `v1_completions`（第 256～284 行）
# - 按 uid 分发 tokenizer 的回复：`python/minisgl/server/api_server.py` · `FrontendManager.listen`（第 117～124 行）、`python/minisgl/server/api_server.py` · `FrontendManager.wait_for_ack`（第 135～151 行）
# - 流式输出：`python/minisgl/server/api_server.py` · `FrontendManager.stream_chat_completions`（第 161～189 行）
# - 客户端断开就取消：`python/minisgl/server/api_server.py` · `FrontendManager.stream_with_cancellation`（第 191～201 行）、`python/minisgl/server/api_server.py` · `FrontendManager.abort_user`（第 203～210 行）
# - 命令行参数：`python/minisgl/server/args.py` · `ServerArgs`（第 14～51 行）、`python/minisgl/server/args.py` · `parse_args`（第 54～268 行）
# - 启动各个进程：`python/minisgl/server/launch.py` · `launch_server`（第 40～113 行）
# - 交互 shell：`python/minisgl/server/api_server.py` · `shell`（第 340～400 行）
#
# ## 测试
#
# 本章的测试在 `tests/test_ch15_server.py`，模块共用一个真的服务器进程：官方 `openai` 客户端的 chat 和 completions、流式和非流式都与 HF 贪心逐 token 相同；100 个并发请求各拿到自己的答案；流式读到一半断开、非流式的客户端超时走了，调度器都取消了请求、空闲时页的账目对得上；各种坏请求得到 400，超过 4 MiB 的请求体得到 413。另有几个测试各起自己的服务器（杀掉调度器、SIGSTOP 调度器、kill -9 启动器、启动失败），以及不起进程、用假的 tokenizer 进程驱动 shell 和 `FrontendManager` 的测试。检查 n 个回答共用提示页的那个：

# %% tags=["remove-input"]
listing("tests/test_ch15_server.py", "test_n_choices_share_the_prompt_pages")

# %% [markdown]
# 页在服务器外面看不见，这个测试用接纳来看：探测请求要的页，共用提示时放得下，每个回答各占一份提示时放不下，要等 4 个回答结束才能接纳。它和三个不起进程的测试：

# %%
run("python -m pytest -q --color=no tests/test_ch15_server.py::test_n_choices_share_the_prompt_pages "
    "tests/test_ch15_server.py::test_shell_multi_turn_reset_and_exit "
    "tests/test_ch15_server.py::test_frontend_routes_replies_aborts_and_fails_fast "
    "tests/test_ch15_server.py::test_flags_map_to_server_args_and_errors_are_chinese")

# %% [markdown]
# ## 怎么讲清楚
#
# 服务化就是把一个请求拆给三类进程：API server 管 HTTP 和按 uid 记账，tokenizer 进程管文字和 token，调度器只管算，彼此只用 ZMQ 传消息。三件事让它可靠：所有回复从一个地址回来，按 uid 放进各自的队列，并发的请求不会串；流式也等第一段回复再发响应头，被拒收的请求才是 400；客户端断开时取消沿原路传到调度器，KV 页当场还回来。流式让第一块文字早到一个数量级以上，后两件事的难处正是流式带来的。

# %% [markdown]
# ## 练习
#
# 1. **用量记在哪里**。没有 `stream_options` 的流式请求，最后一块只带 `finish_reason`。如果想在日志里记下每个请求的用量，该在哪里拿数字？
# 2. **非流式请求的断开**。非流式请求在等回复时另起一个任务等 ASGI 的 `http.disconnect`（`_disconnect_watch`）。为什么不像流式那样靠取消来发现？如果只在“一秒没有回复”时才去看客户端还在不在，会怎样？
# 3. **挑战：停服务时等多久**。uvicorn 默认在停服务时无限期地等每个连接关闭，我们封顶 5 秒（`FrontendManager.drain`）。两种做法各有什么坏处？前面有负载均衡器时，drain 还该多做什么？
#
# ??? success "参考答案"
#
#     1. 在 `_stream` 拿到最后一段回复（`reply.finished`）的地方：`reply.prompt_tokens` 和 `reply.completion_tokens` 总在最后一段里，和客户端要不要无关。
#     2. 非流式的处理函数在等回复时不往外写任何东西，Starlette 不会替它监听断开，只能自己等。生成期间回复每一步都来（只是没发给客户端），“一秒没有回复”永远不成立，超时走掉的客户端留下的请求会一直生成到 `max_tokens`。
#     3. 无限期地等：一个很长的流就能让服务器停不下来，部署系统等不及就 SIGKILL，子进程和 IPC 目录都来不及收拾；封顶：超时的请求被截断，客户端要自己重试。有负载均衡器时，drain 一开始就让 `/health` 回 503，让它先摘掉这个实例。
#
# ### 本章的判题练习
#
# 动手写、由评测程序判对错（随机输入，与参考答案逐项比较）；点题目看题面和提示：

# %% tags=["remove-input"]
exercises()

# %% [markdown]
# ```bash
# python practice/judge.py start 45   # 把第 45 题（本章第一道）的起始代码拷进工作区
# python practice/judge.py test 45    # 判题
# python practice/judge.py hint 45    # 卡住了看提示
# ```

# %% [markdown]
# ## 小结
#
# - `python -m minisgl`：启动器用 spawn 拉起调度器和 tokenizer 进程，等每个都报就绪再回答 HTTP 请求。
# - API server 给每个请求一个 uid 和一个队列，一个收件任务按 uid 分发回复，并发的请求不会串。
# - 流式也先等第一段回复再发响应头，被拒收的请求是一个正常的 400；`n` 个回答靠同样的等待共用提示的页。
# - 客户端断开 → `AbortMsg` → `AbortBackendMsg`，调度器停下请求、还回 KV 页；后端死了，等待者立刻 503，服务器退出。
