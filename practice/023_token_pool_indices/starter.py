"""练习 023 · token 池的下标：从哪里读输入，把新 token 写到哪里（第 7 章 调度器骨架与离线接口）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch

Req = tuple[int, int, int, int]  # (table_idx, cached_len, device_len, max_device_len)，前向之前的值


def input_indices(reqs: list[Req]) -> tuple[torch.Tensor, torch.Tensor]:
    """这一步每个输入 token 在 token 池里的 (行, 位置)：每个请求的 [cached_len, device_len) 首尾相接。

    返回两个一维 int64 张量 (rows, positions)。
    """
    raise NotImplementedError


def write_indices(reqs: list[Req]) -> tuple[torch.Tensor, torch.Tensor]:
    """每个请求的新 token 写回 token 池的 (行, 列)：列是前向之前的 device_len；
    这一步是请求最后一个 token（device_len + 1 == max_device_len）时写到最后一列 -1。

    返回两个一维 int64 张量 (rows, cols)。
    """
    raise NotImplementedError
