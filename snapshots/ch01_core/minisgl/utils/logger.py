"""带 rank 前缀的日志。

张量并行时每个 rank 一个进程，它们的日志混在同一个终端里；每行带上 ``rank N``
才分得清是谁说的。另一方面，"模型加载完成"这种每个 rank 都一样的消息只需要
rank 0 说一次，所以 logger 还多了 ``info_rank0`` 等方法。

进程知道自己的 rank 之后调用一次 ``set_log_rank(rank)``；在那之前（以及单进程时
从不调用的话），日志不带 rank 前缀，``*_rank0`` 方法照常输出。
"""

from __future__ import annotations

import logging
import sys

from minisgl.env import ENV

_log_rank: int | None = None


def set_log_rank(rank: int | None) -> None:
    """记下本进程的 rank，之后所有 minisgl 日志都带上它；传 None 取消。"""
    global _log_rank
    _log_rank = rank


class _RankFormatter(logging.Formatter):
    """格式：``[12:00:01|rank 1] INFO minisgl.engine: 消息``。"""

    def format(self, record: logging.LogRecord) -> str:
        time = self.formatTime(record, "%H:%M:%S")
        where = time if _log_rank is None else f"{time}|rank {_log_rank}"
        return f"[{where}] {record.levelname} {record.name}: {record.getMessage()}"


class _StderrHandler(logging.StreamHandler):
    """每次输出时才取 sys.stderr：测试或 notebook 替换了 stderr，日志也跟着走。"""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ 会赋值，这里忽略
        pass


class RankLogger(logging.LoggerAdapter):
    """普通的 logger，外加只在 rank 0（或还不知道 rank 时）输出的几个方法。"""

    def _is_primary(self) -> bool:
        return _log_rank is None or _log_rank == 0

    def debug_rank0(self, msg: str, *args, **kwargs) -> None:
        if self._is_primary():
            self.debug(msg, *args, **kwargs)

    def info_rank0(self, msg: str, *args, **kwargs) -> None:
        if self._is_primary():
            self.info(msg, *args, **kwargs)

    def warning_rank0(self, msg: str, *args, **kwargs) -> None:
        if self._is_primary():
            self.warning(msg, *args, **kwargs)


def init_logger(name: str) -> RankLogger:
    """取名为 name 的 logger（通常传 ``__name__``），级别由 MINISGL_LOG_LEVEL 决定。

    日志写到 stderr，不混进程序在 stdout 上的正常输出。
    """
    logger = logging.getLogger(name)
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(_RankFormatter())
        logger.addHandler(handler)
    logger.propagate = False  # 已经自己输出了，别再交给根 logger 打印第二遍
    logger.setLevel(ENV.LOG_LEVEL)
    return RankLogger(logger, {})
