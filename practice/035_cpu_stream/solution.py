"""练习 035 的参考答案。"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable

_STOP = object()  # 放进队列：工作线程取到它就退出


class CpuEvent:
    def __init__(self) -> None:
        self._done = threading.Event()
        self._error: BaseException | None = None

    def synchronize(self) -> None:
        self._done.wait()
        if self._error is not None:
            raise self._error

    def query(self) -> bool:
        return self._done.is_set()


class CpuStream:
    def __init__(self) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._closed = False
        self._thread = threading.Thread(target=self._work, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            fn, args, event = item
            try:
                fn(*args)
            except BaseException as error:  # 记下来，synchronize() 时再抛；后面的任务照常做
                event._error = error
            finally:
                event._done.set()

    def submit(self, fn: Callable[..., Any], *args: Any) -> CpuEvent:
        if self._closed:
            raise RuntimeError("CpuStream 已经关闭")
        event = CpuEvent()
        self._queue.put((fn, args, event))
        return event

    def synchronize(self) -> None:
        self.submit(lambda: None)._done.wait()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join()
