"""`python -m minisgl --shell-mode`：在终端里多轮对话，边生成边显示。

不走 HTTP：shell 和 API server 一样直接用 FrontendManager 发请求、收一段段回复。
每一轮把之前的全部对话连同新问题一起发出去（模型本身不记得上一轮），所以第 n 轮的
提示以前 n-1 轮为前缀：radix 缓存命中这段前缀，首个 token 来得更快（每轮结束打印用时）。

命令：/reset 清空历史，/exit（或 Ctrl-D）退出。回答到一半按 Ctrl-C：停下这个回答，回到提示符。
对话长到放不进 max_seq_len 时，去掉最早的一轮再问（并打印一行说明）。
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from typing import Awaitable, Callable

from minisgl.core import SamplingParams

from minisgl.tokenizer.server import PromptTooLong

from .frontend import BackendUnavailable, FrontendManager, ServedModel

HELP = "输入问题回车发送；/reset 清空对话历史，/exit 或 Ctrl-D 退出"


async def _terminal_reader(write: Callable[[str], None]) -> Callable[[], Awaitable[str | None]]:
    """读一行输入的函数：终端里用 prompt_toolkit（能编辑、有历史），管道里直接读 stdin。"""
    if sys.stdin.isatty():
        from prompt_toolkit import PromptSession
        from prompt_toolkit.completion import WordCompleter

        session = PromptSession(completer=WordCompleter(["/reset", "/exit"]))

        async def read() -> str | None:
            try:
                return await session.prompt_async("你> ")
            except EOFError:
                return None
            except KeyboardInterrupt:  # 输入时按 Ctrl-C：丢掉这一行，像普通的 shell 一样
                return ""

        return read

    loop = asyncio.get_running_loop()

    async def read_pipe() -> str | None:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:  # 空串：输入结束
            return None
        write(f"你> {line}")  # 管道里没有回显：自己把问题打出来，输出才读得懂
        return line.rstrip("\n")

    return read_pipe


class ChatSession:
    """一段多轮对话：记住历史，每轮把整段历史发出去，流式打印回答。"""

    def __init__(self, frontend: FrontendManager, params: SamplingParams,
                 write: Callable[[str], None]) -> None:
        self.frontend, self.params, self.write = frontend, params, write
        self.history: list[dict[str, str]] = []

    async def ask(self, question: str) -> str:
        while True:
            messages = self.history + [{"role": "user", "content": question}]
            answer = await self._ask_once(messages)
            if answer is not _TOO_LONG:
                return answer
            if not self.history:
                self.write("[出错] 这个问题本身就超过了模型能放下的长度\n")
                return ""
            self.history = self.history[2:]  # 去掉最早的一问一答
            self.write(f"[对话太长：去掉最早的一轮，带着 {len(self.history) // 2} 轮历史重试]\n")

    async def _ask_once(self, messages: list[dict[str, str]]):
        start = time.perf_counter()
        uid = await self.frontend.submit(messages, self.params, [])
        pieces, first_token_at, reply = [], None, None
        try:
            while reply is None or not reply.finished:
                reply = await self.frontend.next_reply(uid)
                if reply.finish_reason == "error":
                    if reply.error_code == PromptTooLong.code:
                        return _TOO_LONG
                    self.write(f"[出错] {reply.error}\n")
                    return ""
                if first_token_at is None:
                    first_token_at = time.perf_counter() - start
                pieces.append(reply.incremental_output)
                self.write(reply.incremental_output)
        except BaseException:
            self.frontend.abort(uid)  # Ctrl-C 等：别让这个请求继续占着 KV 页
            raise
        answer = "".join(pieces)
        total = time.perf_counter() - start
        self.write(f"\n[首个 token {first_token_at:.2f} 秒 · {reply.completion_tokens} 个 token · "
                   f"共 {total:.2f} 秒 · 提示 {reply.prompt_tokens} 个 token]\n")
        self.history = messages + [{"role": "assistant", "content": answer}]
        return answer

    def reset(self) -> None:
        self.history = []


_TOO_LONG = object()  # _ask_once 的返回值：提示放不下（sentinel：一个只用来比较身份的特殊对象）


async def run_shell(connect: Callable[[], FrontendManager], model: ServedModel, *,
                    on_ready: Callable[[FrontendManager], None] | None = None,
                    temperature: float = 0.0, max_tokens: int | None = None) -> None:
    """shell 的主循环。默认贪心（temperature=0）：同样的对话每次得到同样的回答。"""
    frontend = connect()
    frontend.start()
    if on_ready is not None:
        on_ready(frontend)

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    params = SamplingParams(temperature=temperature,
                            max_tokens=max_tokens or model.default_max_tokens)
    chat = ChatSession(frontend, params, write)
    read = await _terminal_reader(write)
    write(f"mini-sglang shell · 模型 {model.name} · {HELP}\n")
    try:
        while (line := await read()) is not None:
            line = line.strip()
            if not line:
                continue
            if line == "/exit":
                break
            if line == "/reset":
                chat.reset()
                write("[历史已清空]\n")
                continue
            if line.startswith("/"):
                write(f"[不认识的命令 {line}] {HELP}\n")
                continue
            write("助手> ")
            await _interruptible(chat.ask(line), write)
    except BackendUnavailable as e:
        write(f"\n[后端已退出] {e}\n")
    finally:
        await frontend.shutdown()


async def _interruptible(coro, write: Callable[[str], None]) -> None:
    """跑一轮回答；这期间 Ctrl-C（SIGINT）只取消这一轮（请求被 abort），shell 继续。"""
    loop = asyncio.get_running_loop()
    task = loop.create_task(coro)
    try:
        loop.add_signal_handler(signal.SIGINT, task.cancel)
    except (NotImplementedError, RuntimeError):  # 不在主线程（如测试里）：没有这个功能
        return await task
    try:
        await task
    except asyncio.CancelledError:
        if asyncio.current_task().cancelling():  # 被取消的是 shell 自己（在退出），不只是这一轮
            raise
        write("\n[已取消这个回答]\n")
    finally:
        loop.remove_signal_handler(signal.SIGINT)
