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
# 前三章备好了零件：消息和 ZMQ 队列（第 12 章）、tokenizer 进程（第 13 章）、会收发的调度器（第 14 章）。这一章把它们装成 `python -m minisgl`：启动器拉起调度器和 tokenizer 进程、等它们就绪，主进程里的 [API server](../glossary.md#api-server) 用 FastAPI 提供 [OpenAI 兼容接口](../glossary.md#openai-api)，流式和非流式都有，外加一个终端里的多轮对话 shell。一个正经的服务器还要经得起坏请求、超大的请求体、断开的客户端、死掉的子进程和 Ctrl-C（正在生成的请求最多再等 5 秒），本章逐条做到，并用官方 `openai` 客户端验证：温度 0 的回答与 Hugging Face 逐 token 相同。

# %% tags=["remove-cell"]
from minibook.page import *
setup(15)

# %% [markdown]
# ## 自测：能答上来就可以跳过本章
#
# 1. 流式请求为什么要等到第一段回复才发响应头？
# 2. 客户端在流式输出到一半时断开，服务器要做哪两件事？少做一件会怎样？
# 3. 调度器进程被 `kill -9`，API server 怎样知道？知道之前，等待中的请求会怎样？
# 4. shell 的第 5 轮把前 4 轮的问答全部发出去，为什么首 token 时间并不比第 1 轮长？
#
# ??? question "自测参考答案（先自己答，再展开对照）"
#
#     1. 响应头里有状态码，一发出去就改不了。后端可能拒收这个请求（提示太长），等到第一段回复，才知道该回 200 还是 400。
#     2. 不再收这个 uid 的回复，并经 tokenizer 进程把取消传给调度器，让它停下这个请求、还回 KV 页。只做前一件，请求会一直生成到 `max_tokens`，白占着页和算力。
#     3. 启动器的看守线程在子进程的 sentinel（进程退出时变为可读的一个句柄）上等，进程一退出就醒来，经事件循环通知 API server：还没开始回复的请求立刻得到 503，已经在流式输出的请求收到一个 SSE 的 error 事件。没有看守的话它们永远等不到回复。
#     4. 第 5 轮的提示以前 4 轮为前缀，radix 缓存命中这一段（上一轮的回答生成时也进了缓存），只需算新问题那几十个 token；首 token 时间主要取决于要算的 token 数。

# %% [markdown]
# ## 本章要回顾的文件
#
# 本章新建 `minisgl/server/` 下的参数（`args.py`）、启动器（`launch.py`）、HTTP 接口（`api_server.py`）和 shell（`shell.py`），以及入口 `minisgl/__main__.py`；只改一个旧文件：第 13 章的 `minisgl/tokenizer/server.py`，让 tokenizer 进程知道 `max_seq_len`，提前检查提示长度（见“流式也先等第一段”一节）。`examples/` 下是 main（它也提供页面用来起服务器的 `ServerProcess`）和多轮对话的测量脚本。

# %% tags=["remove-input"]
header()

# %% tags=["remove-input"]
tree()

# %% [markdown]
# ## 这一步的 main
#
# 本章的 main 是 `examples/ch15_server.py`：在子进程里运行 `python -m minisgl`，等 `/v1/models` 能访问，用官方 `openai` 客户端发非流式和流式的 chat、一个 completions 和一个坏请求，最后发 SIGTERM，检查每个子进程都退出了、端口空出来了。`python tools/steps.py check 15` 会跑它和本章的测试。自己起一个服务器：
#
# ```bash
# python tools/steps.py run 15 -- python -m minisgl --port 1919          # 不给 --model-path 就用内置的 SmolLM2
# curl http://127.0.0.1:1919/v1/chat/completions -H 'content-type: application/json' \
#      -d '{"messages": [{"role": "user", "content": "What is the capital of France?"}], "temperature": 0}'
# python tools/steps.py run 15 -- python -m minisgl --shell-mode          # 终端里多轮对话
# ```
#
# 下图是一个流式请求走过的进程（编号是先后）：
#
# ![一个流式请求走过的进程：客户端 POST 到 API server，API server 编 uid、发 TokenizeMsg 给 tokenizer 进程；tokenizer 进程套聊天模板，把 UserMsg 推给调度器 rank 0，rank 0 转发给其他 rank；每一步 rank 0 把新 token 作为 DetokenizeMsg 发回 tokenizer 进程，tokenizer 进程增量反分词，把文字片段作为 UserReply 推回 API server，API server 写成一个 SSE 块发给客户端；客户端断开时 AbortMsg 一路传到调度器](../assets/ch15_request_journey.svg)
#
# ## 先量：整段回答要等多久，首 token 要等多久
#
# 页面起一个服务器（`ServerProcess` 在 main 里，就是在子进程里跑 `python -m minisgl`），同一个问题、生成同样 64 个 token，非流式等整段回答，流式看第一块文字什么时候到（[首 token 时间](../glossary.md#ttft)，TTFT）：

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
    """返回 (第一块文字到达的秒数, 全部到达的秒数)；非流式两者相同。"""
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
assert ttft < total / 5, (ttft, total)
print(f"流式让用户早 {total - ttft:.2f} 秒看到第一块文字（{total / ttft:.0f} 倍）；两种方式算的是同样多的 token")

# %% [markdown]
# 时间因机器而异，比例大致稳定：总时间两种方式差不多，流式的第一块文字在 prefill 之后就到了，非流式要等全部 64 个 token。这就是聊天界面都用流式的原因；非流式留给要整段结果的程序（上游只有流式，见“与上游的差异”）。
#
# ## 三类进程，各做一件事
#
# 一个请求要经过三类进程：主进程里的 API server 只管 HTTP 和记账；tokenizer 进程把文字变成 token、把 token 变回文字；调度器（每个 TP rank 一个）只管算。它们之间只通过第 12 章的 ZMQ 地址说话，[IPC 地址](../glossary.md#ipc-address)都在每个服务器自己的临时目录里。启动器先把子进程拉起来，等每一个报“就绪”（[就绪确认](../glossary.md#ready-ack)）：

# %% tags=["remove-input"]
listing("minisgl/server/launch.py", "Backend.start")

# %% tags=["remove-input"]
listing("minisgl/server/launch.py", "Backend._wait_ready")

# %% [markdown]
# 子进程用 `spawn` 启动：全新的解释器，不继承主进程的线程和锁。每个子进程加载完模型或分词器，往 ack 队列放一条消息。调度器的那条带着 `max_seq_len`，启动器把它转给 tokenizer 进程（tokenizer 进程等到它才开始服务），用来提前检查提示长度。等的时候每 0.2 秒看一眼子进程还在不在：模型路径写错、内存不够，调度器一启动就退出，启动器立刻报出是谁、退出码多少，而不是干等到超时。
#
# ??? note "深入：为什么不用 fork，为什么每个子进程都要报就绪"
#
#     `fork` 复制整个进程，包括别的线程持有的锁（torch 的线程池、日志模块的锁），子进程里这些锁可能永远不会被释放；CUDA 也不能在 fork 出来的子进程里重新初始化。`spawn` 慢一些（每个子进程重新 import torch），但干净。就绪确认解决的是另一件事：ZMQ 的 connect 在对方 bind 之前也会成功，消息先排着；如果 API server 一启动就接请求，请求会在一个还没加载完模型的调度器门口排几秒到几十秒，而客户端以为服务器已经好了。等齐 ack 再开 HTTP 端口，"端口能连上"就等于"能服务"，测试和部署脚本都靠这一点判断就绪。
#
# ## API server 只做记账：uid、队列、一个收件任务
#
# API server 跑在一个 asyncio 事件循环里（FastAPI 建在 Starlette 这个 ASGI 框架之上，uvicorn 是跑它的 HTTP 服务器），同时服务很多请求，但所有回复都从同一个 "frontend" 地址回来。`FrontendManager` 给每个请求编一个 uid、建一个自己的队列；一个后台任务不停地收，按 uid 分发：

# %% tags=["remove-input"]
listing("minisgl/server/api_server.py", "FrontendManager.submit")

# %% tags=["remove-input"]
listing("minisgl/server/api_server.py", "FrontendManager._listen")

# %% tags=["remove-input"]
listing("minisgl/server/api_server.py", "FrontendManager.next_reply")

# %% [markdown]
# 先建队列再发消息，回复就不会比队列先到；找不到队列的回复属于已经放弃的请求，直接丢掉。收件任务出了异常就再也收不到任何回复，所以它把这当成后端出错，让所有等待者立刻失败。
#
# ## 流式也先等第一段
#
# 两个接口共用 `_generate`：把 OpenAI 的参数变成 `SamplingParams`，发出请求，然后**先等第一段回复**，再决定回什么：

# %% tags=["remove-input"]
listing("minisgl/server/api_server.py", "_generate")

# %% [markdown]
# 为什么要等：HTTP 的状态码在响应头里，头一发出去就改不了。请求可能被后端拒收：提示太长由 tokenizer 进程拒收，其余的由调度器拒收（第 14 章的 `RejectMsg`，经 tokenizer 进程回到这里）。先发了 200 的头，客户端就只能在流里读到一个莫名其妙的结束。等到第一段再发头，拒收就是一个正常的 400，`stream: true` 也一样：

# %%
long_prompt = {"messages": [{"role": "user", "content": "hello " * 3000}], "stream": True}
r = httpx.post(server.url + "/v1/chat/completions", json=long_prompt, timeout=60)
error = r.json()["error"]
print(r.status_code, error["code"], error["param"], error["message"])
assert r.status_code == 400 and error["code"] == "context_length_exceeded"

# %% [markdown]
# 代价几乎为零：第一段回复本来就是流式客户端等的第一样东西。
#
# 提示长度的规则和上游一样：提示本身占满 `max_seq_len` 才拒收；`max_tokens` 超过剩下的空间就截到剩下的空间，生成到那里 `finish_reason` 是 `"length"`。chat 不给 `max_tokens` 时默认就是"能生成多少生成多少"。这两件事都在 tokenizer 进程里做，因为只有它知道提示有多少个 token：

# %% tags=["remove-input"]
listing("minisgl/tokenizer/server.py", "TokenizerHandler._fit_max_tokens")

# %% [markdown]
# 还有一道更早的关：一个 10 MB 的请求体（约一百七十万个 token）要解析、分词十几秒，而 tokenizer 进程只有一个，这段时间里别的请求的反分词都得等着。所以请求体超过 4 MiB 直接回 413（`BodySizeLimit`，一个 ASGI 中间件，不读完就拒绝）；没超过的，tokenizer 进程在分词之前先数字符：字符数超过 `max_seq_len` × 最长 token 的字符数，分词后一定放不下，不用分词就拒收（`TokenizerHandler._check_chars`）。
#
# ## SSE：一行 data，一个空行，最后 [DONE]
#
# 流式响应是 [SSE](../glossary.md#sse)（server-sent events）：每有一段文字，就写一行 `data: <JSON>` 加一个空行。最后一块带 `finish_reason`，要了 `stream_options.include_usage` 的再多一块只带用量，最后是 `data: [DONE]`：

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
# 每个 token 一块，文字是 tokenizer 进程[增量反分词](../glossary.md#incremental-detokenization)的结果（第 13 章）。生成停在 `max_tokens`，所以 `finish_reason` 是 `"length"`；遇到 EOS 或 `stop` 字符串时是 `"stop"`。`usage` 的数字来自 tokenizer 进程：提示的 token 数和生成的 token 数（含结尾的 EOS）。
#
# ## 坏请求：400，而且像 OpenAI
#
# 请求体由 pydantic（按类型注解检查、转换数据的库，FastAPI 用它解析请求体）模型检查，两个设置让它严格：`extra="forbid"`，不认识的字段报错，而不是悄悄忽略一个客户端以为生效了的参数；`strict=True`，`"max_tokens": "10"` 不会被偷偷转成整数。OpenAI 的可选参数写 `null` 等于不写；标准参数里我们不实现的（`presence_penalty`、`seed`……）只在取“什么都不做”的值时接受，否则 400 并点名；字符串里有编不成 UTF-8 的孤立代理项（`"\ud800"`）、整数大得离谱，也在这里变成 400，而不是到了 msgpack 才变成 500。FastAPI 默认把检查失败回成 422 和它自己的格式，这里换成 OpenAI 的 400 和 `{"error": {...}}`：

# %% tags=["remove-input"]
listing("minisgl/server/api_server.py", "_install_error_handlers")

# %%
from minibook.cli import ljust  # 按显示宽度补空格：汉字占两列

BAD = {
    "不是 JSON": b'{"messages": [',
    "类型不对": {"messages": STORY, "max_tokens": "ten"},
    "max_tokens 为负": {"messages": STORY, "max_tokens": -5},
    "不认识的字段": {"messages": STORY, "frobnicate": True},
    "messages 为空": {"messages": []},
    "top_k=0": {"messages": STORY, "top_k": 0},
    "不支持的参数": {"messages": STORY, "presence_penalty": 1},
}
for name, body in BAD.items():
    kwargs = {"content": body, "headers": {"content-type": "application/json"}} if isinstance(body, bytes) else {"json": body}
    r = httpx.post(server.url + "/v1/chat/completions", timeout=30, **kwargs)
    error = r.json()["error"]
    print(f"{ljust(name, 16)}{r.status_code}  param={error['param']!s:<12}{error['message'][:60]}")
    assert r.status_code == 400 and error["type"] == "invalid_request_error"
ok = httpx.post(server.url + "/v1/chat/completions", json={"messages": STORY, "max_tokens": 3}, timeout=60)
print("之后的正常请求：", ok.status_code)

# %% [markdown]
# 官方客户端把 400 变成 `openai.BadRequestError`，`message` 原样带到用户面前。`top_k=0` 由 `SamplingParams` 自己的检查拦下（第 1 章），同样变成 400。
#
# ## 客户端走了，请求也要停
#
# 客户端断开时，Starlette 取消正在产生 SSE 的那个生成器：`_stream` 的 `finally` 发现请求没有正常结束，就调用 `abort`。它不再收这个 uid 的回复，并把 `AbortMsg` 发给 tokenizer 进程，tokenizer 进程转成 `AbortBackendMsg` 交给调度器，调度器停下请求、还回 KV 页：

# %% tags=["remove-input"]
listing("minisgl/server/api_server.py", "FrontendManager.abort")

# %% [markdown]
# `abort` 不 `await`：它在一个刚被取消的协程里运行，那里再 `await` 会被再次取消（Starlette 底下的 anyio 库管理这些任务，它的取消是"持续"的），所以把发送交给一个新任务。下面读 5 个事件就断开一个本该生成 900 个 token 的请求，然后看服务器的日志：

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
# 三行日志来自两个进程：API server 一行，发出取消；调度器两行，找到请求并拿掉它，随即空闲、核对 KV 页：空闲页加前缀缓存持有的页正好是总页数，断开的请求一页不少地还回来了（它已经算好的前缀留在 radix 缓存里，下次可以复用，也可以逐出）。
#
# ## 8 个客户端，差不多一个的时间
#
# 调度器把同时在跑的请求拼成一批 decode（第 7 章），API server 只是把它们的回复分发回去。8 个客户端同时问 8 个不同的问题，和只有 1 个客户端比：

# %% tags=["milestone"]
# NBVAL_IGNORE_OUTPUT
from concurrent.futures import ThreadPoolExecutor

TOPICS = ["a robot", "the sea", "a cat", "winter", "a city", "music", "a garden", "the moon"]


def one_client(topic: str) -> float:
    body = {"messages": [{"role": "user", "content": f"Write a poem about {topic}."}], "max_tokens": 64,
            "temperature": 0, "ignore_eos": True}
    start = time.perf_counter()
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=300)
    assert r.json()["usage"]["completion_tokens"] == 64
    return time.perf_counter() - start


single = one_client(TOPICS[0])
start = time.perf_counter()
with ThreadPoolExecutor(8) as pool:
    each = list(pool.map(one_client, TOPICS))
together = time.perf_counter() - start
print(f"1 个客户端：{single:.2f} 秒")
print(f"8 个客户端同时：全部完成 {together:.2f} 秒（最快 {min(each):.2f}，最慢 {max(each):.2f}），是 1 个的 {together / single:.1f} 倍")
print(f"一个接一个地问要约 {8 * single:.1f} 秒")
assert together < 4 * single

# %% [markdown]
# 8 个请求各生成 64 个 token，一共 512 个，用的时间却只是 1 个请求的一两倍：decode 的每一步要把全部权重读一遍，8 个请求拼成一批共用这一次读取（第 6 章量过）。数字因机器而异；核越少、别的负载越重，比值越大。
#
# ## 后端死了：立刻 503，不挂住
#
# 子进程也会死：被 OOM killer 杀掉、碰到一个 bug。请求这时还在队列里等回复，而回复永远不会来了，要[快速失败](../glossary.md#fail-fast)。启动器在事件循环启动后起一个看守线程，在所有子进程的 sentinel 上等，谁退出就经 `call_soon_threadsafe` 通知 `FrontendManager.backend_died`：每个等待者的队列里放一个“后端没了”的标记，新请求在 `submit` 里直接失败。还没开始回复的变成 503；已经在流式输出的，状态码早发出去了，收到一个 SSE 的 error 事件：

# %% tags=["remove-input"]
listing("minisgl/server/launch.py", "Backend.watch")

# %%
# NBVAL_IGNORE_OUTPUT
import os
import signal

scheduler_pid = int(re.search(r"已启动调度器 rank 0（pid (\d+)）", server.log()).group(1))
body = {"messages": STORY, "max_tokens": 900, "temperature": 0, "ignore_eos": True}
with ThreadPoolExecutor(1) as pool:
    waiting = pool.submit(httpx.post, server.url + "/v1/chat/completions", json=body, timeout=120)
    time.sleep(0.5)  # 让这个请求进到调度器里
    os.kill(scheduler_pid, signal.SIGKILL)
    killed = time.perf_counter()
    r = waiting.result()
print(f"正在等的请求：{r.status_code}，杀掉调度器之后 {time.perf_counter() - killed:.2f} 秒得到")
start = time.perf_counter()
r = httpx.post(server.url + "/v1/chat/completions", json={"messages": STORY}, timeout=60)
print(f"新请求：{r.status_code}，用了 {time.perf_counter() - start:.3f} 秒：{r.json()['error']['message']}")
print("/health →", httpx.get(server.url + "/health").status_code)
assert r.status_code == 503

# %% [markdown]
# 进程本身不退出（`/v1/models` 仍然可以访问），`/health` 回 503，交给外面的进程管理器（systemd、Kubernetes）决定重启。最后用 SIGTERM 关掉这个服务器。第一次 SIGTERM 或 Ctrl-C：不收新请求，正在生成的请求最多再等 5 秒（`FrontendManager.drain`），到时流式的收到 error 事件、非流式的得到 503；第二次就不再等。uvicorn 自己的做法是无限期地等每个连接关闭：一个 450 token 的流能让它停上一百多秒。然后启动器 SIGTERM 每个子进程、等它们收尾，5 秒内没退的再 SIGKILL，删掉 IPC 临时目录：

# %%
code, left = server.stop()
print(f"退出码 {code}（128 + SIGTERM 的 15），还活着的子进程：{left}")
assert left == []

# %% [markdown]
# ## shell：多轮对话，radix 让首 token 时间不随轮数变长
#
# `--shell-mode` 不开 HTTP 端口，直接用 `FrontendManager` 发请求，边生成边打印。模型不记得上一轮，每一轮都把整段历史发出去：

# %% tags=["remove-input"]
listing("minisgl/server/shell.py", "ChatSession.ask")

# %% [markdown]
# 终端里用 prompt_toolkit 读输入（能编辑、有历史、命令补全）；输入来自管道时直接读 stdin，所以脚本和测试能驱动它。回答到一半按 Ctrl-C 只取消这一轮（请求被 abort），回到提示符；对话长到放不进 `max_seq_len` 时，shell 去掉最早的一轮再问，并打印一行说明。`examples/ch15_multiturn.py` 把同一段 6 轮对话（第一轮贴一段几百 token 的文字）喂给 `--cache-type radix` 和 `--cache-type naive` 的 shell。两个服务器同时开着，每一轮两边紧挨着问，机器的忙闲对两边的影响差不多；整段跑 3 遍，首 token 时间每轮取最快的一次。每轮真正算了多少个提示 token 不靠推算，读调度器自己的日志：它每次空闲时记下前缀缓存里有多少个 token（这里一页一个 token）；一轮结束时，提示里没命中的部分和生成的 token 都进了缓存，所以缓存新增的 token 减去本轮生成的 token，就是本轮算过的提示 token。这个测量要起 6 次服务器、跑两分钟左右，下面是构建这一页时的真实输出（时间因机器和负载而异，“算了”的 token 数与机器无关）：

# %% tags=["remove-input", "milestone"]
# NBVAL_SKIP
import contextlib
import io

buffer = io.StringIO()
with contextlib.redirect_stdout(buffer):
    run("python examples/ch15_multiturn.py")
print(buffer.getvalue(), end="")

# %% [markdown]
# 第 1 轮两边都从头算整段提示（“算了”的一列相同），首 token 时间也就差不多。之后 naive 每轮都重算越来越长的整段历史，首 token 时间跟着提示长度一起涨；radix 每轮只算二十个上下的 token：新问题和聊天模板补上的几个标记（上一轮的回答生成时已经进了缓存），首 token 时间不随轮数变长，比 naive 快一个数量级。
#
# ## 运行
#
# 本章的 main 在本章的树里真实跑出来的输出：

# %%
run("python examples/ch15_server.py")

# %% [markdown]
# 值得注意的地方：
#
# - 就绪时有两个子进程：调度器 rank 0 和 tokenizer 进程（它等调度器报上 `max_seq_len` 才就绪）；API server 在主进程里。
# - 非流式的回答和流式各块拼起来的文字相同；这个回答以 EOS 结束，所以 `finish_reason=stop`，`usage` 的 8 个生成 token 里含结尾的 EOS。completions 生成满 8 个 token，`finish_reason=length`。
# - 坏请求得到 400 和 OpenAI 格式的错误；SIGTERM 之后退出码 143（128 + 15），3 个子进程（调度器、tokenizer 进程、multiprocessing 的 resource tracker）都退出了，端口能重新监听。
#
# ## 与上游的差异
#
# 上游以固定的提交 20fcd7f 为准。
#
# - 我们的 `stream: false` 回一个完整的 `chat.completion`，带 `usage` 和真实的 `finish_reason`，因为要整段结果的程序不该自己拼流。上游只会流式输出，`finish_reason` 总是 `"stop"`，没有 `usage`（issue #51，后由 PR #125 修复；未合并的 PR #126）。`python/minisgl/server/api_server.py` · `FrontendManager.stream_chat_completions`
# - 上游没有 `/v1/completions`，也不处理 `stop`；我们两个都有，因为官方客户端和压测工具都会用到。
# - 提示长度：和上游一样，`max_tokens` 截到剩下的空间，只拒收本身就放不下的提示。不同的是，我们在 tokenizer 进程里就拒收并回 400，因为客户端该知道为什么；上游的调度器丢掉它、记一行警告，客户端永远等不到回复。`python/minisgl/scheduler/scheduler.py` · `Scheduler._process_one_msg`
# - 我们的启动器看守子进程、停服务时最多等 5 秒，因为挂住的请求和停不下来的服务器一样糟。上游启动完就不再管子进程，后端死了请求一直挂着。`python/minisgl/server/launch.py` · `launch_server`
# - 我们对不认识的字段、类型不对的参数、不支持的非中性参数回 400，因为悄悄忽略会让客户端以为参数生效了。上游忽略不认识的字段，`n`、`presence_penalty` 收下但不生效。`python/minisgl/server/api_server.py` · `OpenAICompletionRequest`
#
# ## 测试
#
# 本章的测试在 `tests/test_ch15_server.py`，整个模块只起一个真的服务器进程：官方 `openai` 客户端的 chat 和 completions、流式和非流式都与 HF 贪心逐 token 相同；各种坏请求（表 `BAD_REQUESTS`：坏 JSON、类型不对、超长提示、孤立代理项、离谱的整数、不支持的参数……）各得到 400 和 OpenAI 的错误体，超过 4 MiB 的请求体得到 413；100 个并发请求（10 个答案各不相同的提示）各拿到自己的答案；流式读到一半断开，日志里出现调度器的取消和空闲时的页核对；杀掉调度器之后请求得到 503；子进程还没就绪就退出（坏的 `config.json`）时，启动器报一行中文错误、退出码 1、不留子进程；SIGTERM 之后扫 `/proc` 找不到任何子进程，端口和 IPC 目录都释放了。断开的那个测试：

# %% tags=["remove-input"]
listing("tests/test_ch15_server.py", "test_client_disconnect_aborts_and_pages_come_back")

# %% [markdown]
# 另有几个不起进程的测试：用一个假的 tokenizer 进程驱动 shell（多轮历史、`/reset`、`/exit`、Ctrl-C、对话太长时去掉最早的一轮）和 `FrontendManager`（按 uid 分发、取消、后端死了或停服务时等待者失败），tokenizer 进程的长度检查，以及命令行参数（旗标对应到哪个字段、写错时的中文报错）。其中三个：

# %%
T = "tests/test_ch15_server.py::"
run(f"python -m pytest -q --color=no {T}test_shell_multi_turn_reset_and_exit "
    f"{T}test_frontend_routes_replies_aborts_and_fails_fast {T}test_flags_map_to_server_args_and_errors_are_chinese")

# %% [markdown]
# ## 怎么讲清楚
#
# 服务化就是把一个请求拆给三类进程：API server 只管 HTTP 和按 uid 记账，tokenizer 进程管文字和 token，调度器只管算，彼此只用 ZMQ 传消息。三点让它像个正经的服务器：流式也等第一段回复再发头，拒收的请求才能是 400；客户端断开时沿原路把取消传到调度器，KV 页当场还回来；启动器看守子进程，后端一死等待者立刻失败，而不是永远挂着。一个 64 token 的回答，流式让第一块文字早到几十倍；8 个并发客户端的总时间只是 1 个的一两倍，而不是八倍。

# %% [markdown]
# ## 练习
#
# 1. **没有 `stream_options` 的流式请求**。客户端不要用量，最后一块只带 `finish_reason`。如果你想在日志里记下每个请求的用量，应该在哪里拿数字？
# 2. **非流式请求的断开**。`_collect` 每秒看一次客户端是否还在。为什么不像流式那样靠取消来发现？这一秒的延迟有什么代价？
# 3. **挑战：停服务时等多久**。uvicorn 默认在停服务时无限期地等每个连接关闭；我们封顶 5 秒（`FrontendManager.drain`）。说出两种做法各自的坏处，再说说：如果前面有负载均衡器，还应该在 drain 里多做什么？
#
# ??? success "参考答案"
#
#     1. 在 `_stream` 拿到最后一段回复（`reply.finished`）的地方：`reply.prompt_tokens` 和 `reply.completion_tokens` 总是在最后一段里，和客户端要不要无关。
#     2. 非流式的处理函数在等回复时没有往外写任何东西，Starlette 不会替它监听断开，只能自己问 `request.is_disconnected()`。代价是断开后最多再生成一秒的 token、多占一秒的页。
#     3. 无限期地等：一个很长的流（或一个慢客户端）能让服务器停不下来，部署系统等不及就 SIGKILL，子进程和 IPC 目录都来不及收拾。封顶：超过时限的请求被截断，客户端收到 error 事件或 503，要自己重试。每个在跑的请求都是一个打开的 HTTP 连接，所以等连接关闭就是等请求做完；封顶由我们来做，因为时限一到得叫醒那些还在等回复的协程，让它们正常结束，而不是让 uvicorn 直接取消任务（那样会打出一堆 CancelledError 回溯）。有负载均衡器时，drain 一开始就让 `/health` 回 503，让它先摘掉这个实例。
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
# - `python -m minisgl`：启动器用 spawn 拉起调度器（每个 TP rank 一个）和 tokenizer 进程，等每个都报就绪（调度器的 `max_seq_len` 转给 tokenizer 进程），再开 HTTP 端口；不给 `--model-path` 就用内置的 SmolLM2。
# - API server 给每个请求一个 uid 和一个队列，一个收件任务按 uid 分发回复；`/v1/chat/completions` 和 `/v1/completions` 都有流式（SSE，`[DONE]` 结尾）和非流式，带 `finish_reason` 和 `usage`。
# - 流式先等第一段回复再发响应头，所以被拒收的请求也是 400；坏请求一律 400 和 OpenAI 的错误体，超大的请求体 413，放不下的提示在分词前后就被拒收，`max_tokens` 截到剩下的空间。
# - 客户端断开 → `AbortMsg` → `AbortBackendMsg`，调度器停下请求、还回 KV 页；子进程一死，看守线程让请求立刻失败；SIGTERM 或 Ctrl-C 最多再等在跑的请求 5 秒，然后停掉每个子进程，删掉 IPC 目录。
# - `--shell-mode` 是终端里的多轮对话；radix 缓存让后面几轮的首 token 时间不随历史变长而变长。
