"""练习 050 的参考答案。"""

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

    def _exchange(self, x: torch.Tensor) -> list[torch.Tensor]:
        """每个 rank 把 x 发给其余所有 rank，再收齐别人的：返回按 rank 排好的 world_size 份。

        send 立刻返回，所以先全部发出去、再挨个收，不会互相等死。"""
        for dst in range(self.world_size):
            if dst != self.rank:
                self.send(x, dst)
        parts = []
        for src in range(self.world_size):
            if src == self.rank:
                parts.append(x)
            else:
                buf = torch.empty_like(x)
                self.recv(buf, src)
                parts.append(buf)
        return parts

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        if self.world_size == 1:
            return x
        parts = self._exchange(x)
        total = parts[0].clone()
        for part in parts[1:]:  # 每个 rank 都按 rank 0, 1, 2 … 的顺序加：浮点的和逐位相同
            total += part
        x.copy_(total)  # 原地，和 dist.all_reduce 一样
        return x

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        # cat 总是新分配一块内存（world_size = 1 时也是拷贝）：之后改 x 不会影响结果
        return torch.cat(self._exchange(x), dim=0)


def enable_p2p(rank: int, world_size: int, send: Send, recv: Recv) -> None:
    """把插件追加到 plugins 的末尾：之后每个 DistributedCommunicator() 都用它。"""
    DistributedCommunicator.plugins.append(P2PDistributedImpl(rank, world_size, send, recv))
