"""练习 034 · 重叠循环的记账：晚一步知道结果（第 11 章 重叠调度）

把 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

from typing import Protocol


class Handle(Protocol):
    def result(self) -> list[int]: ...  # 这一批每一项的下一个 token，只能取一次


class Engine(Protocol):
    def launch(self, batch: list[tuple[int, int]]) -> Handle: ...  # batch：(req_id, row) 的列表


def overlap_generate(prompts: list[list[int]], max_tokens: list[int], engine: Engine,
                     num_rows: int, eos_id: int | None = None) -> list[list[int]]:
    """重叠调度的循环：每步先发出这一批，再处理上一批的结果。返回每个请求的输出（含 eos_id）。

    结束：拿到了 max_tokens[i] 个 token，或者拿到了 eos_id。结束后的 token 丢掉；
    结束的请求等包含它的最后一批做完才还行。参数不对时抛 ValueError。
    """
    raise NotImplementedError
