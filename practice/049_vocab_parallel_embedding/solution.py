"""练习 049 的参考答案。"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def vocab_block(vocab: int, tp: int, rank: int) -> tuple[int, int]:
    if vocab <= 0:
        raise ValueError(f"vocab 必须是正数，现在是 {vocab}")
    if tp <= 0:
        raise ValueError(f"tp 必须是正数，现在是 {tp}")
    if not 0 <= rank < tp:
        raise ValueError(f"rank 必须在 [0, {tp}) 里，现在是 {rank}")
    per = -(-vocab // tp)  # ceil(vocab / tp)
    start = min(rank * per, vocab)
    return start, min(start + per, vocab)


def shard_embedding(weight: torch.Tensor, tp: int, rank: int) -> torch.Tensor:
    if weight.dim() != 2:
        raise ValueError(f"weight 应该是二维的 [vocab, dim]，现在的形状是 {tuple(weight.shape)}")
    vocab = weight.shape[0]
    start, stop = vocab_block(vocab, tp, rank)
    per = -(-vocab // tp)
    shard = weight.new_zeros(per, weight.shape[1])  # 不够 per 行的块，末尾留着零行
    shard[: stop - start] = weight[start:stop]
    return shard


def local_lookup(ids: torch.Tensor, shard: torch.Tensor, start: int) -> torch.Tensor:
    local = ids - start  # 在本 rank 的分片里是第几行
    mine = (local >= 0) & (local < shard.shape[0])
    out = F.embedding(torch.where(mine, local, 0), shard)  # 不归我管的先查第 0 行，下标不会越界
    return out.masked_fill(~mine.unsqueeze(-1), 0)  # 再把这些行置零


def vocab_parallel_embedding(ids: torch.Tensor, shards: list[torch.Tensor]) -> torch.Tensor:
    if not shards or any(s.shape != shards[0].shape for s in shards):
        raise ValueError("shards 不能为空，而且每个 rank 的分片形状要一样")
    per = shards[0].shape[0]
    out = None
    for rank, shard in enumerate(shards):
        part = local_lookup(ids, shard, rank * per)  # 每个 rank 各查一次整批
        out = part if out is None else out + part  # all-reduce：各 rank 的结果相加
    return out
