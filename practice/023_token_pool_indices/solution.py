"""练习 023 · token 池的下标：从哪里读输入，把新 token 写到哪里 —— 参考答案。"""

from __future__ import annotations

import torch

Req = tuple[int, int, int, int]  # (table_idx, cached_len, device_len, max_device_len)，前向之前的值


def input_indices(reqs: list[Req]) -> tuple[torch.Tensor, torch.Tensor]:
    rows = torch.tensor([r[0] for r in reqs], dtype=torch.int64)
    starts = torch.tensor([r[1] for r in reqs], dtype=torch.int64)
    lens = torch.tensor([r[2] - r[1] for r in reqs], dtype=torch.int64)
    offsets = torch.cumsum(lens, 0) - lens  # 每个请求的第一个 token 在整批里的下标
    positions = torch.arange(int(lens.sum()), dtype=torch.int64) - (offsets - starts).repeat_interleave(lens)
    return rows.repeat_interleave(lens), positions


def write_indices(reqs: list[Req]) -> tuple[torch.Tensor, torch.Tensor]:
    rows = torch.tensor([r[0] for r in reqs], dtype=torch.int64)
    # 新 token 放在前向之前的 device_len；最后一步的新 token 没人再读，写到最后一列
    cols = torch.tensor([r[2] if r[2] + 1 < r[3] else -1 for r in reqs], dtype=torch.int64)
    return rows, cols
