"""为压测起一个真的服务器（python -m minisgl 的子进程），用完关掉。

    with launch_server("--cuda-graph-max-bs", "16", env={"MINISGL_DISABLE_OVERLAP_SCHEDULING": "1"}) as url:
        run_online(url, requests, rate=4)

端口由系统挑一个空闲的；服务器自己的日志写进 log_path（不给就丢掉）。启动失败时抛 RuntimeError，
带上日志的末尾：压测脚本不用自己去翻日志。
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def launch_server(*flags: str, env: dict[str, str] | None = None, log_path: str | Path | None = None,
                  timeout: float = 600.0) -> Iterator[str]:
    """起服务器，等到 /v1/models 能访问，交出它的地址；离开 with 时 SIGTERM，等它收尾完。"""
    port = free_port()
    cmd = [sys.executable, "-m", "minisgl", "--port", str(port), *flags]
    with contextlib.ExitStack() as stack:
        if log_path is None:
            log_path = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="minisgl-bench-"))) / "server.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        try:
            _wait_ready(proc, f"http://127.0.0.1:{port}", Path(log_path), timeout)
            yield f"http://127.0.0.1:{port}"
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # 启动器收到 SIGTERM 会停掉它的全部子进程
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def _wait_ready(proc: subprocess.Popen, url: str, log_path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"服务器启动时退出了（退出码 {proc.returncode}），日志的末尾：\n{tail}")
        try:
            if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"服务器 {timeout:.0f} 秒内没有就绪，日志在 {log_path}")
        time.sleep(0.2)
