"""练习 047 · 回复按 uid 对号：一个收件任务，很多个等待者（第 15 章 API Server、启动器与 shell）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import asyncio


class BackendGone(Exception):
    """后端进程已经退出，这个请求不会再有回复。"""


class ReplyRouter:
    """把一个收件任务收到的回复，按 uid 交给各自的等待者。"""

    def __init__(self) -> None:
        raise NotImplementedError

    def open(self) -> int:
        """登记一个新请求，返回 uid（0、1、2……）。fail 之后抛 BackendGone。"""
        raise NotImplementedError

    def deliver(self, uid: int, piece: str, finished: bool) -> None:
        """收件任务收到一段回复。uid 不在登记表里就丢掉。"""
        raise NotImplementedError

    async def next(self, uid: int) -> tuple[str, bool]:
        """等 uid 的下一段回复；交出 finished=True 的那段后 uid 结束。后端没了时抛 BackendGone。"""
        raise NotImplementedError

    def abort(self, uid: int) -> bool:
        """客户端断开：不再登记这个 uid，丢掉它还没取走的回复。返回它之前是否还登记着。"""
        raise NotImplementedError

    def fail(self, reason: str) -> None:
        """后端死了：每个登记着的 uid 交完已到的回复后抛 BackendGone，正在等的立刻醒来。"""
        raise NotImplementedError

    @property
    def open_uids(self) -> set[int]:
        raise NotImplementedError
