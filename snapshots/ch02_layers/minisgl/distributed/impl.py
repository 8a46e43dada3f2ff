"""TP rank 之间的集合通信：all_reduce 与 all_gather。

层只认识 DistributedCommunicator 这一个入口；真正干活的是 plugins 列表里的最后一个实现。
默认实现走 torch.distributed：CPU 上是 gloo，GPU 上是 NCCL。以后想换一套更快的通信库，
往 plugins 里追加一个实现即可，层的代码一行不改。

只有一个 rank 时，层根本不会调用这里（见 layers/linear.py），所以单卡运行不需要初始化
torch.distributed。
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
import torch.distributed as dist


class DistributedImpl(ABC):
    """一种集合通信的实现。"""

    @abstractmethod
    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """各 rank 的 x 逐元素求和，每个 rank 都拿到总和。"""

    @abstractmethod
    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        """各 rank 的 x 沿第 0 维按 rank 顺序拼起来：[n, ...] → [size * n, ...]。"""


class TorchDistributedImpl(DistributedImpl):
    """基于 torch.distributed 的实现，进程组由第 16 章的启动代码初始化。"""

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(x, op=dist.ReduceOp.SUM)
        return x

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        size = dist.get_world_size()
        x = x.contiguous()
        if dist.get_backend() == "nccl":
            out = x.new_empty((size * x.shape[0], *x.shape[1:]))
            dist.all_gather_into_tensor(out, x)
            return out
        # gloo 没有 all_gather_into_tensor，只能收进一组张量再拼起来
        parts = [torch.empty_like(x) for _ in range(size)]
        dist.all_gather(parts, x)
        return torch.cat(parts, dim=0)


class DistributedCommunicator:
    """层调用集合通信的唯一入口。"""

    plugins: list[DistributedImpl] = [TorchDistributedImpl()]

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        return self.plugins[-1].all_reduce(x)

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        return self.plugins[-1].all_gather(x)


def destroy_distributed() -> None:
    """退出前销毁进程组（如果建过），避免 torch 在退出时报资源泄漏。"""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
