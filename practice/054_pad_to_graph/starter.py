"""练习 054 · 补齐到录过的批大小：决定录哪些档位，给 decode 批补上占位请求（第 18 章 图捕获）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def capture_sizes(explicit: list[int] | None, max_bs: int, max_running_req: int) -> list[int]:
    """explicit 不为 None 时用它（去重、排序）；否则 1、2、4，再 8、16、…，都不超过 max_bs。
    最后去掉比 max_running_req 大的。坏参数抛 ValueError。"""
    raise NotImplementedError


def pad_decode_batch(reqs: list[tuple[int, int, int]], sizes: list[int], dummy: tuple[int, int, int]) -> dict:
    """reqs 每项 (row, position, slot)。返回 {"graph_bs": 档位或 None, "rows": [...], "positions": [...],
    "out_loc": [...]}：走图时在后面补 dummy，补到不小于请求数的最小档位。坏参数抛 ValueError。"""
    raise NotImplementedError
