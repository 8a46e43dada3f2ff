"""练习 049 · 词表并行的嵌入：不归我管的 token 查出零行（第 16 章 张量并行）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def vocab_block(vocab: int, tp: int, rank: int) -> tuple[int, int]:
    """rank 负责的词表区间 [start, stop)：每个 rank per = ceil(vocab / tp) 行，start = min(rank * per, vocab)，
    stop = min(start + per, vocab)。vocab、tp 不是正数，rank 不在 [0, tp) 里时抛 ValueError。
    """
    raise NotImplementedError


def shard_embedding(weight: torch.Tensor, tp: int, rank: int) -> torch.Tensor:
    """rank 持有的分片 [per, dim]：weight 的第 start..stop-1 行，不够 per 行时末尾补零行。

    weight 不是二维时抛 ValueError（tp、rank 不合法时也抛，同 vocab_block）。
    """
    raise NotImplementedError


def local_lookup(ids: torch.Tensor, shard: torch.Tensor, start: int) -> torch.Tensor:
    """一个 rank 的查表：ids 任意形状，返回 [*ids.shape, dim]。

    id 在 [start, start + shard.shape[0]) 里的查 shard[id - start]，别的输出全零行。整批一次算，
    不逐个 token 循环，不拿越界的下标查表。
    """
    raise NotImplementedError


def vocab_parallel_embedding(ids: torch.Tensor, shards: list[torch.Tensor]) -> torch.Tensor:
    """模拟 tp = len(shards) 个 rank：每个 rank 对整批 ids 调用一次 local_lookup（start = rank * per），
    再把各 rank 的结果加起来（all-reduce）。shards 为空或形状不一时抛 ValueError。
    """
    raise NotImplementedError
