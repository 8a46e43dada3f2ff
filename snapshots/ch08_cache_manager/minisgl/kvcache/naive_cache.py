"""最朴素的前缀缓存：什么都不存，永远匹配不到。

它让"没有前缀缓存"也走同一套接口：CacheManager 的代码不必为它写特殊分支。
换成别的前缀缓存（例如 radix 树），调度器一行都不用改。
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import BaseCacheHandle, BasePrefixCache, InsertResult, MatchResult, SizeInfo


@dataclass(frozen=True)
class NaiveCacheHandle(BaseCacheHandle):
    """永远是空的一段。"""

    cached_len: int = 0

    def get_matched_indices(self) -> torch.Tensor:
        return torch.empty(0, dtype=torch.int32)


class NaivePrefixCache(BasePrefixCache):
    """不存任何东西的前缀缓存。"""

    def __init__(self, page_size: int) -> None:
        assert page_size >= 1
        self.page_size = page_size

    def match_prefix(self, input_ids: torch.Tensor) -> MatchResult:
        return MatchResult(NaiveCacheHandle())

    def lock_handle(self, handle: BaseCacheHandle, unlock: bool = False) -> None:
        assert isinstance(handle, NaiveCacheHandle), f"不是本缓存发出的句柄：{handle!r}"

    def insert_prefix(self, input_ids: torch.Tensor, indices: torch.Tensor) -> InsertResult:
        assert len(input_ids) == len(indices)
        return InsertResult(0, NaiveCacheHandle())  # 什么都没收下：槽位仍归调用者

    def evict(self, size: int) -> torch.Tensor:
        if size > 0:
            raise RuntimeError(f"朴素前缀缓存里什么都没有，逐不出 {size} 个 token")
        return torch.empty(0, dtype=torch.int32)

    @property
    def size_info(self) -> SizeInfo:
        return SizeInfo(evictable_size=0, protected_size=0)

    def check_integrity(self) -> None:
        pass  # 没有任何记账，自然不会出错
