"""练习 042 · 消息分派：批里套批，退出之后的不算（第 14 章 调度器的收发与多 rank 同步）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

from typing import Callable


def dispatch(msgs: list[tuple], add_req: Callable[[int, int], None],
             abort_req: Callable[[int], object]) -> tuple[list[tuple[int, str]], bool]:
    """按顺序处理消息，返回 (拒绝列表 [(uid, 原因)], 是否继续运行)。

    ("user", uid, prompt_len) → add_req；它抛 ValueError 就记为拒绝，接着处理后面的消息。
    ("abort", uid) → abort_req。("exit",) → 停下，后面的都不处理，第二项返回 False。
    ("batch", [...]) → 按顺序处理里面的消息（可以嵌套）。别的种类抛 TypeError。
    """
    raise NotImplementedError
