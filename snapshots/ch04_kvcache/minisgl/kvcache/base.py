"""KV 池的接口：注意力后端只通过这几个方法读写 K/V。

KV 池是一排"槽位"（slot），每个槽位存一个 token 在某一层的 K 和 V。
一个请求的第 pos 个 token 放在哪个槽位，由页表 ``page_table[req.table_idx, pos]`` 记录；
池子本身不知道哪个槽位属于哪个请求，分配槽位是 PageAllocator 的事（allocator.py）。
注意力后端只认这个接口，换一种存法（例如 MLA 的压缩 KV）只需要换池子。
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch


class BaseKVCachePool(ABC):
    """按槽位存放每一层 K/V 的池子。"""

    @abstractmethod
    def k_cache(self, layer_id: int) -> torch.Tensor:
        """第 layer_id 层的 K，[num_slots, local_kv_heads, head_dim]，池子的视图（不是拷贝）。"""

    @abstractmethod
    def v_cache(self, layer_id: int) -> torch.Tensor:
        """第 layer_id 层的 V，形状同 k_cache。"""

    @abstractmethod
    def store_kv(
        self, k: torch.Tensor, v: torch.Tensor, out_loc: torch.Tensor, layer_id: int
    ) -> None:
        """把这一步 T 个 token 的 K/V（[T, local_kv_heads, head_dim]）写进第 layer_id 层的
        槽位 out_loc（[T]）。"""

    @property
    @abstractmethod
    def num_layers(self) -> int: ...

    @property
    @abstractmethod
    def num_slots(self) -> int:
        """槽位总数 = 页数 × 页大小。"""

    @property
    @abstractmethod
    def dtype(self) -> torch.dtype: ...

    @property
    @abstractmethod
    def device(self) -> torch.device: ...
