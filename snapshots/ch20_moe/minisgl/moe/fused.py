"""按块算 MoE：先把 (token, 专家) 对按专家排好、每个专家补齐到 block_size 的整数倍，再一块一块地算。

GPU 上（上游的 Triton fused_moe）一个程序块正好算一块：块里的行都属于同一个专家，权重从显存里
直接读，不必为每个专家各发一次 kernel。本书在 CPU 上用一个 C++ 算子（csrc/moe.cpp）走同样的布局。

排好的布局只有上界是固定的：M·k 个 (token, 专家) 对，每个专家最多补 block_size − 1 行，
所以缓冲区的长度只取决于 M、k、E 和 block_size，不取决于路由的结果——这正是图捕获要的。
"""

from __future__ import annotations

import torch

from .base import BaseMoeBackend


def padded_capacity(num_pairs: int, num_experts: int, block_size: int) -> int:
    """排好、补齐之后最多有几行：每个专家最多补 block_size − 1 行，再凑成整块。"""
    worst = num_pairs + num_experts * (block_size - 1)
    return (worst + block_size - 1) // block_size * block_size


def moe_align_block_size(topk_ids: torch.Tensor, block_size: int, num_experts: int
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """topk_ids [M, k]（-1 表示不在本 rank 上）→ (sorted_ids, expert_ids, num_tokens_post_padded)。

    - sorted_ids [P]：把 M·k 个格子按专家排好（同一专家内按格子编号升序），格子编号 = m·k + j；
      每个专家的那一段补到 block_size 的整数倍，补的位置和末尾没用到的位置都填 M·k（“空行”）；
    - expert_ids [P / block_size]：每一块属于哪个专家，没用到的块是 -1；
    - num_tokens_post_padded [1]：补齐后实际用到的行数。
    P = padded_capacity(M·k, E, block_size)，只取决于形状。全程是张量运算，没有读回主机的数。
    """
    flat = topk_ids.flatten().long()
    pairs = flat.numel()
    capacity = padded_capacity(pairs, num_experts, block_size)
    bucket = torch.where(flat >= 0, flat, num_experts)  # 不在本 rank 的格子归到第 E 个桶，最后丢掉
    # 每个桶几个格子。不用 bincount：它的输出长度取决于数据里的最大值，图捕获不了
    counts = flat.new_zeros(num_experts + 1).scatter_add_(0, bucket, torch.ones_like(bucket))
    padded = (counts[:num_experts] + block_size - 1) // block_size * block_size
    ends = torch.cumsum(padded, 0)  # 第 e 个专家的段是 [ends[e] − padded[e], ends[e])
    order = torch.argsort(bucket, stable=True)  # 按专家排，同一专家内格子编号保持升序
    first_of_bucket = torch.cumsum(counts, 0) - counts  # 排好后每个桶从第几个开始
    rank_in_bucket = torch.arange(pairs, device=flat.device) - first_of_bucket[bucket[order]]
    starts = torch.cat([ends - padded, ends.new_full((1,), capacity)])  # 第 E 个桶写到多出来的那一格
    dest = starts[bucket[order]] + rank_in_bucket
    sorted_ids = flat.new_full((capacity + pairs,), pairs)  # 多出的 pairs 格接住第 E 个桶，最后切掉
    sorted_ids.scatter_(0, dest, order)
    blocks = torch.arange(capacity // block_size, device=flat.device) * block_size
    expert_ids = torch.searchsorted(ends, blocks, right=True)  # 第一块起点落在哪个专家的段里
    expert_ids = torch.where(expert_ids < num_experts, expert_ids, -1)
    return sorted_ids[:capacity].int(), expert_ids.int(), ends[-1:].int()


class FusedMoe(BaseMoeBackend):
    """排好、补齐（moe_align_block_size），再由 torch.ops.minisgl.fused_moe 一次算完所有专家。"""

    def __init__(self, block_size: int = 16) -> None:
        from minisgl.kernel import load_kernels

        load_kernels()  # 编不出来时在建后端时就报（KernelsUnavailable），不等到第一次前向
        self.block_size = block_size

    def forward(self, x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor,
                topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
        sorted_ids, expert_ids, _ = moe_align_block_size(topk_ids, self.block_size, w1.shape[0])
        return torch.ops.minisgl.fused_moe(x, w1, w2, topk_weights, sorted_ids, expert_ids, self.block_size)
