"""练习 054 · 补齐到录过的批大小：决定录哪些档位，给 decode 批补上占位请求（第 18 章 图捕获）

参考答案。
"""

from __future__ import annotations


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def capture_sizes(explicit: list[int] | None, max_bs: int, max_running_req: int) -> list[int]:
    """explicit 不为 None 时用它（去重、排序）；否则 1、2、4，再 8、16、…，都不超过 max_bs。
    最后去掉比 max_running_req 大的。坏参数抛 ValueError。"""
    if not _is_int(max_bs) or max_bs < 0:
        raise ValueError(f"max_bs 要是 >= 0 的整数，收到 {max_bs!r}")
    if not _is_int(max_running_req) or max_running_req < 1:
        raise ValueError(f"max_running_req 要是 >= 1 的整数，收到 {max_running_req!r}")
    if explicit is not None:
        for x in explicit:
            if not _is_int(x) or x < 1:
                raise ValueError(f"档位要是 >= 1 的整数，收到 {x!r}")
        sizes = set(explicit)
    else:
        sizes = {bs for bs in (1, 2, 4) if bs <= max_bs} | set(range(8, max_bs + 1, 8))
    return sorted(bs for bs in sizes if bs <= max_running_req)


def pad_decode_batch(reqs: list[tuple[int, int, int]], sizes: list[int], dummy: tuple[int, int, int]) -> dict:
    """reqs 每项 (row, position, slot)。返回 {"graph_bs": 档位或 None, "rows": [...], "positions": [...],
    "out_loc": [...]}：走图时在后面补 dummy，补到不小于请求数的最小档位。坏参数抛 ValueError。"""
    if not reqs:
        raise ValueError("reqs 是空的")
    if any(not _is_int(bs) or bs < 1 for bs in sizes) or any(a >= b for a, b in zip(sizes, sizes[1:])):
        raise ValueError(f"档位表要是严格递增的正整数，收到 {sizes!r}")
    rows = [r for r, _, _ in reqs]
    slots = [s for _, _, s in reqs]
    if len(set(rows)) != len(rows):
        raise ValueError(f"有两个请求在同一行：{rows}")
    if len(set(slots)) != len(slots):
        raise ValueError(f"有两个请求写同一个槽位：{slots}")
    if dummy[0] in rows or dummy[2] in slots:
        raise ValueError(f"真实请求用了占位行 {dummy[0]} 或占位槽位 {dummy[2]}")
    n = len(reqs)
    graph_bs = next(bs for bs in sizes if bs >= n) if sizes and n <= sizes[-1] else None
    padded = list(reqs) + [tuple(dummy)] * ((graph_bs or n) - n)
    return {"graph_bs": graph_bs, "rows": [r for r, _, _ in padded],
            "positions": [p for _, p, _ in padded], "out_loc": [s for _, _, s in padded]}
