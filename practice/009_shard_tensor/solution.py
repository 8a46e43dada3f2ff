"""练习 009 · 按权重名切分：shard_tensor —— 参考答案。"""

from __future__ import annotations

import torch

SPLIT_DIM0 = {"q_proj", "gate_proj", "up_proj"}  # 列并行：按输出维（第 0 维）均分
SPLIT_KV = {"k_proj", "v_proj"}  # 列并行，但按 KV 头切，头不够时复制
SPLIT_DIM1 = {"o_proj", "down_proj"}  # 行并行：按输入维（第 1 维）均分
SPLIT_VOCAB = {"embed_tokens", "lm_head"}  # 按词表切，最后补零


def _own(piece: torch.Tensor) -> torch.Tensor:
    """拷成一块独立的连续内存。切片（哪怕已经连续）只是完整张量的视图，交出去会让完整张量一直活着。"""
    return piece.clone(memory_format=torch.contiguous_format)


def _even_slice(value: torch.Tensor, dim: int, rank: int, size: int, key: str) -> torch.Tensor:
    n = value.shape[dim]
    if n % size != 0:
        raise ValueError(f"{key}：第 {dim} 维的 {n} 不能被 TP size {size} 整除")
    per = n // size
    return _own(value.narrow(dim, rank * per, per))


def _kv_slice(
    value: torch.Tensor, rank: int, size: int, num_kv_heads: int, key: str
) -> torch.Tensor:
    rows = value.shape[0]
    if num_kv_heads <= 0 or rows % num_kv_heads != 0:
        raise ValueError(f"{key}：{rows} 行不能平均分成 {num_kv_heads} 个 KV 头")
    head_dim = rows // num_kv_heads
    if num_kv_heads >= size:
        if num_kv_heads % size != 0:
            raise ValueError(f"{key}：{num_kv_heads} 个 KV 头不能平均分给 {size} 个 rank")
        local = num_kv_heads // size
        first_head = rank * local
    else:
        if size % num_kv_heads != 0:
            raise ValueError(f"{key}：{size} 个 rank 不能平均复制 {num_kv_heads} 个 KV 头")
        # 相邻的 size // num_kv_heads 个 rank 共用一个头
        local = 1
        first_head = rank // (size // num_kv_heads)
    return _own(value[first_head * head_dim : (first_head + local) * head_dim])


def _vocab_slice(value: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    vocab = value.shape[0]
    per = -(-vocab // size)  # div_ceil
    start, end = min(rank * per, vocab), min((rank + 1) * per, vocab)
    part = value[start:end]
    if end - start < per:  # 词表除不尽：末尾的 rank 补零行，凑满 per 行
        pad = value.new_zeros((per - (end - start), *value.shape[1:]))
        part = torch.cat([part, pad], dim=0)
    return _own(part)


def shard_tensor(
    key: str, value: torch.Tensor, rank: int, size: int, num_kv_heads: int
) -> torch.Tensor:
    if size <= 0 or not (0 <= rank < size):
        raise ValueError(f"需要 size > 0 且 0 <= rank < size，现在 rank={rank}, size={size}")
    parts = key.split(".")
    module = (
        parts[-2] if len(parts) >= 2 else ""
    )  # "model.layers.0.self_attn.q_proj.weight" -> "q_proj"
    if module in SPLIT_DIM0:
        return _even_slice(value, 0, rank, size, key)
    if module in SPLIT_KV:
        return _kv_slice(value, rank, size, num_kv_heads, key)
    if module in SPLIT_DIM1:
        if value.dim() != 2:
            raise ValueError(f"{key}：行并行的权重应该是二维的，现在是 {tuple(value.shape)}")
        return _even_slice(value, 1, rank, size, key)
    if module in SPLIT_VOCAB:
        return _vocab_slice(value, rank, size)
    return value  # norm 之类：每个 rank 一份完整的
