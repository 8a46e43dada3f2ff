"""词表并行的嵌入层和 LM head。

词表很大（Qwen3 是 151936 行），按词表维切给各 rank：每个 rank 存连续的一段行，
不够整除时最后一个 rank 的末尾补零行。

- 嵌入（查表）：token id 落在自己那段里就查，不在就输出 0；all_reduce 一加，
  每个 token 恰好有一个 rank 贡献了非零的那一行。
- LM head（乘回词表）：每个 rank 算出自己那段词表的 logits，all_gather 拼成完整的一行，
  再切掉补零的那几列。
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from minisgl.core import get_global_ctx
from minisgl.distributed import DistributedCommunicator, get_tp_info
from minisgl.utils import div_ceil, to_device

from .base import BaseOP


class VocabParallelEmbedding(BaseOP):
    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        tp = get_tp_info()
        self.num_embeddings, self.tp_size = num_embeddings, tp.size
        self.rows_per_rank = div_ceil(num_embeddings, tp.size)
        self.vocab_start = tp.rank * self.rows_per_rank  # 本 rank 负责 [start, start + rows)
        self.weight = torch.empty(self.rows_per_rank, embedding_dim)
        self._comm = DistributedCommunicator()

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        if self.tp_size == 1:
            return F.embedding(input_ids, self.weight)
        local = input_ids - self.vocab_start
        mine = (local >= 0) & (local < self.rows_per_rank)
        out = F.embedding(torch.where(mine, local, 0), self.weight)
        out = out * mine.unsqueeze(-1).to(out.dtype)  # 不归我管的 token 输出 0
        return self._comm.all_reduce(out)


class ParallelLMHead(VocabParallelEmbedding):
    """隐状态 → 整个词表上的 logits。

    prefill 时一个请求有很多 token，但只有最后一个位置的 logits 用来采样下一个 token，
    所以先挑出每个请求的最后一个 token，再乘词表矩阵——这步矩阵乘是 [请求数, 词表]
    而不是 [token 数, 词表]，长提示时省下大量计算和内存。

    tied_embedding 不为 None 时（SmolLM2、Qwen3-0.6B 都是），直接用嵌入层的权重，
    本层不再有自己的 weight。
    """

    def __init__(
        self, num_embeddings: int, embedding_dim: int,
        tied_embedding: VocabParallelEmbedding | None = None,
    ) -> None:
        super().__init__(num_embeddings, embedding_dim)
        self._tied = tied_embedding
        if tied_embedding is not None:
            del self.weight  # 不是自己的权重，不出现在 state_dict 里
        self._matmul: Callable[[torch.Tensor], torch.Tensor] | None = None  # None：F.linear

    def matmul_weight(self) -> torch.Tensor:
        return self._tied.weight if self._tied is not None else self.weight

    def use_matmul(self, matmul: Callable[[torch.Tensor], torch.Tensor], *, drop_weight: bool) -> None:
        """换掉 x @ W.T 的算法（见 quant.py）。共用的是嵌入层的权重时不删：查表还要用。"""
        self._matmul = matmul
        if drop_weight and self._tied is None:
            del self.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        batch = get_global_ctx().batch
        if batch.is_prefill:
            x = x[_last_token_rows(batch.reqs, x.device)]
        if self._matmul is None:
            logits = F.linear(x, self.matmul_weight()).float()  # [请求数, 本 rank 的那段词表]
        else:
            logits = self._matmul(x).float()
        if self.tp_size > 1:
            gathered = self._comm.all_gather(logits)  # [tp × 请求数, rows_per_rank]，按 rank 排
            n = logits.shape[0]
            logits = gathered.view(self.tp_size, n, -1).permute(1, 0, 2).reshape(n, -1)
        return logits[:, : self.num_embeddings]  # 切掉最后一个 rank 补的零行


def _last_token_rows(reqs, device: torch.device) -> torch.Tensor:
    """prefill 批里每个请求最后一个 token 的行号：extend_len 的前缀和减 1，在 CPU 上算好。

    to_device 在 GPU 上走锁页内存 + non_blocking：CPU 不必等这次拷贝完成就去发下一个算子。
    """
    rows, end = [], 0
    for req in reqs:
        end += req.extend_len
        rows.append(end - 1)
    return to_device(rows, torch.int64, device)
