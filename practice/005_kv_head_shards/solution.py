"""练习 005 · div_even 与 KV 头的切分和复制 —— 参考答案。"""

from __future__ import annotations

import torch


def div_even(a: int, b: int, allow_replicate: bool = False) -> int:
    if a < 0 or b <= 0:
        raise ValueError(f"div_even 要求 a >= 0、b > 0：a={a}, b={b}")
    if allow_replicate and 0 < a < b:
        # 头比 rank 少：每个 rank 持有 1 个头，每个头复制 b // a 份
        if b % a != 0:
            raise ValueError(f"{b} 个 rank 不能平均复制 {a} 个头（{b} 不是 {a} 的倍数）")
        return 1
    if a % b != 0:
        raise ValueError(f"{a} 不能被 {b} 整除")
    return a // b


def kv_heads_of_rank(num_kv_heads: int, tp_size: int, tp_rank: int) -> list[int]:
    if num_kv_heads <= 0:
        raise ValueError(f"num_kv_heads 必须是正整数：{num_kv_heads}")
    local = div_even(num_kv_heads, tp_size, allow_replicate=True)
    if not (0 <= tp_rank < tp_size):
        raise ValueError(f"tp_rank 必须在 [0, {tp_size}) 里，现在是 {tp_rank}")
    if num_kv_heads < tp_size:
        ranks_per_head = tp_size // num_kv_heads
        return [tp_rank // ranks_per_head]
    return list(range(tp_rank * local, (tp_rank + 1) * local))


def shard_kv_weight(
    weight: torch.Tensor, num_kv_heads: int, head_dim: int, tp_size: int, tp_rank: int
) -> torch.Tensor:
    if weight.dim() != 2 or weight.shape[0] != num_kv_heads * head_dim:
        raise ValueError(
            f"weight 应该是 ({num_kv_heads} * {head_dim}, hidden) 的二维张量，"
            f"现在是 {tuple(weight.shape)}"
        )
    heads = kv_heads_of_rank(num_kv_heads, tp_size, tp_rank)
    # 一个 rank 的头总是连续的一段，直接切行，再拷成独立的一块
    start, end = heads[0] * head_dim, (heads[-1] + 1) * head_dim
    return weight[start:end].clone()  # 拷一份：连续，且不是完整权重的视图
