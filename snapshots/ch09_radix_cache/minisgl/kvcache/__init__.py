"""KV 缓存：存 K/V 的池子（mha_pool）、按页分配池中槽位的分配器（allocator），
以及记住"哪些前缀已经算过"的前缀缓存（naive_cache 什么都不存；radix_cache 是一棵 radix 树）。

前缀缓存按名字登记在 SUPPORTED_CACHE_MANAGER 里，create_prefix_cache(名字, page_size) 造一个。
"""

from __future__ import annotations

from typing import Callable

from minisgl.utils import Registry

from .allocator import OutOfPagesError, PageAllocator, pages_to_slots, slots_to_pages
from .base import (
    BaseCacheHandle,
    BaseKVCachePool,
    BasePrefixCache,
    InsertResult,
    MatchResult,
    SizeInfo,
)
from .mha_pool import MHAKVCachePool, create_kvcache_pool

# 名字 -> 造前缀缓存的函数（参数是 page_size）。名字沿用上游
PrefixCacheCreator = Callable[[int], BasePrefixCache]
SUPPORTED_CACHE_MANAGER = Registry[PrefixCacheCreator]("前缀缓存类型")


@SUPPORTED_CACHE_MANAGER.register("naive")
def _create_naive_cache(page_size: int) -> BasePrefixCache:
    from .naive_cache import NaivePrefixCache

    return NaivePrefixCache(page_size)


@SUPPORTED_CACHE_MANAGER.register("radix")
def _create_radix_cache(page_size: int) -> BasePrefixCache:
    from .radix_cache import RadixPrefixCache

    return RadixPrefixCache(page_size)


def create_prefix_cache(cache_type: str, page_size: int) -> BasePrefixCache:
    """按名字造一个前缀缓存；名字来自用户的配置（cache_type），名字不对时报中文错。"""
    return SUPPORTED_CACHE_MANAGER[cache_type](page_size)


__all__ = [
    "BaseKVCachePool",
    "MHAKVCachePool",
    "create_kvcache_pool",
    "PageAllocator",
    "OutOfPagesError",
    "pages_to_slots",
    "slots_to_pages",
    "BaseCacheHandle",
    "BasePrefixCache",
    "InsertResult",
    "MatchResult",
    "SizeInfo",
    "SUPPORTED_CACHE_MANAGER",
    "create_prefix_cache",
]
