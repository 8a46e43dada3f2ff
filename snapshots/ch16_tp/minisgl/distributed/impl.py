"""TP rank 之间的集合通信：all_reduce 与 all_gather。

层只认识 DistributedCommunicator 这一个入口；真正干活的是 plugins 列表里的最后一个实现。
默认实现走 torch.distributed：CPU 上是 gloo，GPU 上是 NCCL。想换一套更快的通信库（上游的
PyNCCL），往 plugins 里追加一个实现即可，层的代码一行不改。

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

    def broadcast(self, x: torch.Tensor, src: int = 0) -> torch.Tensor:
        """每个 rank 的 x 都换成 src 那个 rank 的 x（原地）。

        默认借 all_gather 实现：收齐每个 rank 的一份，只留 src 的那份，所以只写了 all_reduce 和
        all_gather 的插件也能用；多传了 size − 1 份数据，更快的实现覆盖它即可。
        """
        gathered = self.all_gather(x.reshape(1, -1))  # [size, x 的元素个数]，按 rank 排
        return x.copy_(gathered[src].view_as(x))


# 收进一个张量的 all_gather：新版 torch 叫 all_gather_single（旧名 all_gather_into_tensor 仍能用，
# 但会警告），老版本只有旧名，更老的 gloo 两个都不支持（见 gather_into_one_tensor）
_GATHER_INTO = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


class TorchDistributedImpl(DistributedImpl):
    """基于 torch.distributed 的实现：默认进程组由 Engine 建（CPU 上 gloo，GPU 上 NCCL）。"""

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(x, op=dist.ReduceOp.SUM)
        return x

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        size = dist.get_world_size()
        x = x.contiguous()
        if gather_into_one_tensor():
            out = x.new_empty((size * x.shape[0], *x.shape[1:]))
            _GATHER_INTO(out, x)  # 直接收进一块连续内存，按 rank 排好
            return out
        parts = [torch.empty_like(x) for _ in range(size)]  # 退路：收进一组张量再拼起来
        dist.all_gather(parts, x)
        return torch.cat(parts, dim=0)

    def broadcast(self, x: torch.Tensor, src: int = 0) -> torch.Tensor:
        dist.broadcast(x, src=src)
        return x


_gather_support: bool | None = None


def gather_into_one_tensor() -> bool:
    """默认进程组能不能把 all_gather 直接收进一个张量。

    NCCL 一直能。gloo 要看 torch 的版本：第一次调用时拿一个小张量真的试一次（所有 rank 同时试，
    结果也一样），试不通就以后都走"收进一组张量再拼"的退路。
    """
    global _gather_support
    if _gather_support is None:
        if dist.get_backend() == "nccl":
            _gather_support = True
        else:
            probe = torch.zeros(1)
            try:
                _GATHER_INTO(probe.new_empty(dist.get_world_size()), probe)
                _gather_support = True
            except (RuntimeError, NotImplementedError):
                _gather_support = False
    return _gather_support


class DistributedCommunicator:
    """层调用集合通信的唯一入口。"""

    plugins: list[DistributedImpl] = [TorchDistributedImpl()]

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        return self.plugins[-1].all_reduce(x)

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        return self.plugins[-1].all_gather(x)

    def broadcast(self, x: torch.Tensor, src: int = 0) -> torch.Tensor:
        return self.plugins[-1].broadcast(x, src)


def destroy_distributed() -> None:
    """退出前销毁进程组（如果建过），避免 torch 在退出时报资源泄漏。"""
    global _gather_support
    _gather_support = None  # 下一个进程组可能换了后端
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
