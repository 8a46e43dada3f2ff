"""练习 047 的参考答案。"""

from __future__ import annotations

import asyncio


class BackendGone(Exception):
    """后端进程已经退出，这个请求不会再有回复。"""


class _Gone:
    """放进队列的"后端没了"标记：排在已经到了的回复后面。"""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class ReplyRouter:
    def __init__(self) -> None:
        self._queues: dict[int, asyncio.Queue] = {}
        self._next_uid = 0
        self._failed: str | None = None

    def open(self) -> int:
        if self._failed is not None:
            raise BackendGone(self._failed)
        uid = self._next_uid
        self._next_uid += 1
        self._queues[uid] = asyncio.Queue()
        return uid

    def deliver(self, uid: int, piece: str, finished: bool) -> None:
        queue = self._queues.get(uid)
        if queue is not None:
            queue.put_nowait((piece, finished))

    async def next(self, uid: int) -> tuple[str, bool]:
        item = await self._queues[uid].get()
        if isinstance(item, _Gone):
            del self._queues[uid]
            raise BackendGone(item.reason)
        if item[1]:
            del self._queues[uid]
        return item

    def abort(self, uid: int) -> bool:
        return self._queues.pop(uid, None) is not None

    def fail(self, reason: str) -> None:
        if self._failed is not None:
            return
        self._failed = reason
        for queue in self._queues.values():
            queue.put_nowait(_Gone(reason))

    @property
    def open_uids(self) -> set[int]:
        return set(self._queues)
