"""练习 005 · div_even 与 KV 头的切分和复制（第 1 章 核心数据结构）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch


def div_even(a: int, b: int, allow_replicate: bool = False) -> int:
    """必须整除的除法：a % b == 0 时返回 a // b。

    allow_replicate=True 且 0 < a < b 时，要求 b % a == 0，返回 1（复制）。
    其他情况，以及 a < 0 或 b <= 0 时，抛 ValueError。
    """
    raise NotImplementedError


def kv_heads_of_rank(num_kv_heads: int, tp_size: int, tp_rank: int) -> list[int]:
    """第 tp_rank 个 rank 持有的全局 KV 头编号（升序）。

    num_kv_heads、tp_size 不是正整数，分不了，或 tp_rank 越界时抛 ValueError。
    """
    raise NotImplementedError


def shard_kv_weight(
    weight: torch.Tensor, num_kv_heads: int, head_dim: int, tp_size: int, tp_rank: int
) -> torch.Tensor:
    """从完整的 k_proj / v_proj 权重 (num_kv_heads * head_dim, hidden) 里取出这个 rank 的那些行。

    返回形状 (本地头数 * head_dim, hidden)、dtype 不变的连续张量。行数对不上时抛 ValueError。
    """
    raise NotImplementedError
