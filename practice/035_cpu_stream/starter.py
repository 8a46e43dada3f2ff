"""练习 035 · CPU 上的“流”和“事件”（第 11 章 重叠调度）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
只用 threading 和 queue，不要用 concurrent.futures。
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable


class CpuEvent:
    """代表工作线程上的一个任务（以及排在它前面的全部任务）。"""

    def synchronize(self) -> None:
        """等这个任务做完；任务里抛了异常就原样抛出。"""
        raise NotImplementedError

    def query(self) -> bool:
        """做完了没有（不等）。"""
        raise NotImplementedError


class CpuStream:
    """一个工作线程，任务按提交的先后一个个执行。"""

    def __init__(self) -> None:
        raise NotImplementedError

    def submit(self, fn: Callable[..., Any], *args: Any) -> CpuEvent:
        """把 fn(*args) 排进队列，不等它执行就返回。close() 之后抛 RuntimeError。"""
        raise NotImplementedError

    def synchronize(self) -> None:
        """等到此刻之前提交的任务全部做完。"""
        raise NotImplementedError

    def close(self) -> None:
        """等排着的任务做完，让工作线程退出。"""
        raise NotImplementedError
