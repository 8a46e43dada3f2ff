"""第 15 章的 main：启动 `python -m minisgl`，用官方 openai 客户端问它，再用 SIGTERM 关掉它。

    python examples/ch15_server.py                    # 默认：内置的 SmolLM2
    MINISGL_MODEL=/path/to/Qwen3-0.6B python examples/ch15_server.py

它做的事和读者在终端里做的一样：起服务器（另一个进程）、等 /v1/models 能访问、发请求；
最后检查 SIGTERM 之后每个子进程都退出了、端口空出来了。别的脚本和本章的页面也用这里的
ServerProcess 来起服务器。
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children_of(pid: int) -> set[int]:
    """pid 的全部子孙进程（扫 /proc，不依赖 psutil；只在 Linux 上有 /proc）。"""
    parent_of = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent_of[int(entry.name)] = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except OSError:
                pass
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        for child, parent in parent_of.items():
            if parent == current and child not in found:
                found.add(child)
                todo.append(child)
    return found


def is_alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


class ServerProcess:
    """在子进程里跑 `python -m minisgl <args>`，等它就绪；with 块结束时用 SIGTERM 关掉。"""

    def __init__(self, *args: str, ready_timeout: float = 180.0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_file = tempfile.NamedTemporaryFile(prefix="minisgl-server-", suffix=".log",
                                                    delete=False)
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        cmd = [sys.executable, "-m", "minisgl", "--port", str(self.port), *args]
        self.proc = subprocess.Popen(cmd, stdout=self.log_file, stderr=subprocess.STDOUT, env=env)
        self._stopped: tuple[int | None, list[int]] | None = None
        atexit.register(self.stop)  # 调用者忘了关（或者中途出错）：解释器退出时也关掉
        try:
            self._wait_ready(ready_timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"服务器启动失败（退出码 {self.proc.returncode}）：\n{self.log()[-2000:]}")
            try:
                if httpx.get(self.url + "/v1/models", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"服务器 {timeout:.0f} 秒内没有就绪：\n{self.log()[-2000:]}")

    def log(self) -> str:
        if self._stopped is not None:  # 已经关了：日志文件删掉了，用留下的副本
            return self._final_log
        return Path(self.log_file.name).read_text(encoding="utf-8", errors="replace")

    def stop(self) -> tuple[int | None, list[int]]:
        """SIGTERM，等它退出。返回 (退出码, 还活着的子进程)。可以重复调用。"""
        if self._stopped is not None:
            return self._stopped
        family = children_of(self.proc.pid)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        deadline = time.monotonic() + 10  # 孙进程（multiprocessing 的 resource tracker）稍后才退
        while any(is_alive(p) for p in family) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [p for p in family if is_alive(p)]
        for pid in left:  # 不留孤儿
            os.kill(pid, signal.SIGKILL)
        self.log_file.close()
        self._final_log = self.log()
        Path(self.log_file.name).unlink(missing_ok=True)  # 不在 /tmp 里留下文件
        self._stopped = (self.proc.returncode, left)
        return self._stopped

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def main() -> None:
    from openai import OpenAI

    from minibook.models import default_model

    model = default_model()
    print(f"== python -m minisgl --model-path {model.name} --num-pages 512")
    with ServerProcess("--model-path", str(model), "--num-pages", "512") as server:
        children = children_of(server.proc.pid)
        started = re.findall(r"已启动 ?(.+?)（pid", server.log())
        print(f"就绪：API server（主进程）+ 子进程 {started}")
        client = OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)
        print("GET /v1/models →", [m.id for m in client.models.list().data])

        question = [{"role": "user", "content": "What is the capital of France?"}]
        out = client.chat.completions.create(model=model.name, messages=question,
                                             max_tokens=32, temperature=0)
        print("\n非流式 chat：", repr(out.choices[0].message.content))
        print(f"  finish_reason={out.choices[0].finish_reason}  usage={out.usage.prompt_tokens}"
              f"+{out.usage.completion_tokens}={out.usage.total_tokens}")

        stream = client.chat.completions.create(model=model.name, messages=question,
                                                max_tokens=32, temperature=0, stream=True)
        pieces, finish = [], None
        for chunk in stream:
            pieces.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
        print("流式 chat，一块一块：", " | ".join(repr(p) for p in pieces if p))
        assert "".join(pieces) == out.choices[0].message.content
        print(f"  拼起来和非流式的回答相同；finish_reason={finish}")

        text = client.completions.create(model=model.name, prompt="The capital of France is",
                                         max_tokens=8, temperature=0)
        print("\ncompletions：", repr(text.choices[0].text), f"finish_reason={text.choices[0].finish_reason}")

        bad = httpx.post(server.url + "/v1/completions", json={"prompt": "hi", "max_tokens": -1})
        print(f"\n坏请求（max_tokens=-1）→ {bad.status_code} {bad.json()}")

        code, left = server.stop()
        port_free = _can_listen(server.port)
        print(f"\nSIGTERM → 退出码 {code}；{len(children)} 个子进程还活着的：{len(left)} 个；端口空出来了：{port_free}")
        assert not left and port_free


def _can_listen(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
            return True
        except OSError:
            return False


if __name__ == "__main__":
    main()
