"""KV 池的接口：注意力后端只通过这几个方法读写 K/V。

KV 池是一排"槽位"（slot），每个槽位存一个 token 在某一层的 K 和 V。
一个请求的第 pos 个 token 放在哪个槽位，由页表 ``page_table[req.table_idx, pos]`` 记录；
池子本身不知道哪个槽位属于哪个请求，分配槽位是 PageAllocator 的事（allocator.py）。
注意力后端只认这个接口，换一种存法（例如 MLA 的压缩 KV）只需要换池子。

后半部分是前缀缓存（prefix cache）的接口 BasePrefixCache：它记住"哪串 token 的
K/V 已经在哪些槽位里"，新请求的开头若与之相同，就直接借用那些槽位，不必再算一遍。
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import NamedTuple

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


# ==================================================================== 前缀缓存的接口
#
# 约定（每一种前缀缓存都遵守，CacheManager 只靠这些约定工作）：
# - 键是 token id，值是这些 token 的 K/V 所在的槽位：都是 CPU 上的一维 int32 张量，一一对应。
#   记账全在 CPU 上，和 PageAllocator 一样，从不把页表从设备上读回来。
# - 长度都以 token 计，而且只存整页：存进去、匹配出来、逐出去的长度都是 page_size 的整数倍。
# - 缓存只记槽位，不管页的引用计数：它存下哪些页、逐出哪些页，由 CacheManager 去
#   PageAllocator 那里加上或放下"缓存的那一份持有"。


@dataclass(frozen=True)
class BaseCacheHandle(ABC):
    """一次匹配（或插入）的结果：缓存里与输入开头相同的那一段。

    持有句柄的请求要先 lock_handle 锁住它，这一段才不会被逐出；用完再解锁。
    """

    cached_len: int  # 这一段有多少个 token（page_size 的整数倍）

    @abstractmethod
    def get_matched_indices(self) -> torch.Tensor:
        """这一段 token 的槽位：CPU 上 [cached_len] 的 int32。只在句柄锁住期间可靠。"""


class SizeInfo(NamedTuple):
    """缓存里存了多少个 token：能逐出的 + 被锁住（正在被请求使用）的。"""

    evictable_size: int
    protected_size: int

    @property
    def total_size(self) -> int:
        return self.evictable_size + self.protected_size


class InsertResult(NamedTuple):
    """insert_prefix 的结果。

    cached_len：插入之前缓存里就已经有的前缀长度。这一段缓存保留自己原来的槽位，
        调用者传进来的那份槽位没有被收下，仍归调用者。
    handle：整段（对齐到整页之后）插入内容的句柄，handle.cached_len 就是插入的长度；
        [cached_len, handle.cached_len) 是这次新收下的、调用者传进来的槽位。
    """

    cached_len: int
    handle: BaseCacheHandle


class MatchResult(NamedTuple):
    """match_prefix 的结果。字段名沿用上游：上游给"主机内存里的二级缓存"留了位置。"""

    cuda_handle: BaseCacheHandle  # 设备 KV 池里的命中；CPU 上跑时也叫这个名字


class BasePrefixCache(ABC):
    """前缀缓存：记住哪些 token 序列的 K/V 已经在 KV 池里。

    构造时只需要 page_size（见 kvcache/__init__.py 的 create_prefix_cache）。
    """

    @abstractmethod
    def match_prefix(self, input_ids: torch.Tensor) -> MatchResult:
        """找出缓存里与 input_ids 开头相同的最长一段（整页）。

        不增删缓存的内容（radix 树可以拆分节点、刷新访问时间）。返回的句柄没有锁住：
        在 lock_handle 之前发生一次 evict，它的槽位就可能被逐出。
        """

    @abstractmethod
    def lock_handle(self, handle: BaseCacheHandle, unlock: bool = False) -> None:
        """锁住（unlock=True 时解锁）句柄对应的一段。锁是计数的：锁几次就要解几次。

        只改 size_info（在"能逐出"和"被锁住"之间挪动），不改缓存的内容。
        被锁住的 token 不会被 evict 逐出。
        """

    @abstractmethod
    def insert_prefix(self, input_ids: torch.Tensor, indices: torch.Tensor) -> InsertResult:
        """把 input_ids（和它们的槽位 indices，等长）存进缓存；只存开头的整页部分。

        已经在缓存里的那一段不重复存（见 InsertResult）。要保存 indices 的拷贝，
        不要保存调用者张量的视图。返回的句柄没有锁住。
        """

    @abstractmethod
    def evict(self, size: int) -> torch.Tensor:
        """逐出至少 size 个没有被锁住的 token，返回它们的槽位（CPU 上的 int32）。

        实际逐出的可以比 size 多（整页、整个节点）。evict(0) 总是安全的，什么都不做；
        size 超过 size_info.evictable_size 时抛 RuntimeError，什么都不改。
        """

    @property
    @abstractmethod
    def size_info(self) -> SizeInfo:
        """现在存了多少个 token，其中多少能逐出、多少被锁住。"""

    @abstractmethod
    def check_integrity(self) -> None:
        """检查内部记账是否自洽，不自洽就抛 RuntimeError（中文，带上对不上的数）。"""
