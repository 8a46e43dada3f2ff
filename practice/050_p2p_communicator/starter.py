"""练习 050 · 通信插件：只用点对点的 send / recv 拼出 all_reduce 和 all_gather（第 16 章 张量并行）

把 P2PDistributedImpl 里的两个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable

import torch

# send(tensor, dst)：把 tensor 此刻的内容发给 rank dst，立刻返回。
# recv(tensor, src)：等 rank src 发来的下一条消息，把它写进 tensor（形状、dtype 要和发来的一样）。
Send = Callable[[torch.Tensor, int], None]
Recv = Callable[[torch.Tensor, int], None]


# ---- 和 minisgl/distributed/impl.py 里的一样（不用改），只是 plugins 一开始是空的：这里没有 torch.distributed ----


class DistributedImpl(ABC):
    """一种集合通信的实现。"""

    @abstractmethod
    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """各 rank 的 x 逐元素求和，每个 rank 都拿到总和。"""

    @abstractmethod
    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        """各 rank 的 x 沿第 0 维按 rank 顺序拼起来：[n, ...] → [size * n, ...]。"""

    @abstractmethod
    def broadcast(self, x: torch.Tensor, src: int = 0) -> torch.Tensor:
        """每个 rank 的 x 都换成 src 那个 rank 的 x（原地）。"""


class DistributedCommunicator:
    """层调用集合通信的唯一入口：真正干活的是 plugins 的最后一个。"""

    plugins: list[DistributedImpl] = []

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        return self.plugins[-1].all_reduce(x)

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        return self.plugins[-1].all_gather(x)

    def broadcast(self, x: torch.Tensor, src: int = 0) -> torch.Tensor:
        return self.plugins[-1].broadcast(x, src)


# ---- 你的插件 ------------------------------------------------------------------------------------


class P2PDistributedImpl(DistributedImpl):
    """只用点对点的 send / recv 实现集合通信。每个 rank 在自己的进程里有一个实例。"""

    def __init__(self, rank: int, world_size: int, send: Send, recv: Recv) -> None:
        self.rank, self.world_size = rank, world_size
        self.send, self.recv = send, recv

    def broadcast(self, x: torch.Tensor, src: int = 0) -> torch.Tensor:
        # 写好的例子：src 把 x 发给其余每个 rank，别的 rank 收进自己的 x（原地）
        if self.rank == src:
            for dst in range(self.world_size):
                if dst != src:
                    self.send(x, dst)
        else:
            self.recv(x, src)
        return x

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """原地：x 变成所有 rank 的 x 之和，返回 x 本身。所有 rank 拿到的和逐位相同。"""
        raise NotImplementedError

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        """返回新的张量 [world_size * n, ...]：rank 0 的 x 在最前，然后 rank 1 ……；不改 x，也不和 x 共用内存。"""
        raise NotImplementedError


def enable_p2p(rank: int, world_size: int, send: Send, recv: Recv) -> None:
    """把插件追加到 plugins 的末尾：之后每个 DistributedCommunicator() 都用它。"""
    DistributedCommunicator.plugins.append(P2PDistributedImpl(rank, world_size, send, recv))
