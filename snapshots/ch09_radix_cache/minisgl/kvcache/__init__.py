"""KV 缓存：存 K/V 的池子（mha_pool）、按页分配池中槽位的分配器（allocator），
以及记住"哪些前缀已经算过"的前缀缓存（naive_cache 什么都不存；radix_cache 是一棵 radix 树）。

前缀缓存按名字登记在 SUPPORTED_CACHE_MANAGER 里，create_prefix_cache(名字, page_size) 造一个。
"""

from __future__ import annotations

from typing import Callable

from .allocator import OutOfPagesError, PageAllocator
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
SUPPORTED_CACHE_MANAGER: dict[str, PrefixCacheCreator] = {}


def register_prefix_cache(name: str) -> Callable[[PrefixCacheCreator], PrefixCacheCreator]:
    """装饰器：把一个造前缀缓存的函数登记在 name 下。"""

    def register(creator: PrefixCacheCreator) -> PrefixCacheCreator:
        assert name not in SUPPORTED_CACHE_MANAGER, f"前缀缓存 {name!r} 登记了两次"
        SUPPORTED_CACHE_MANAGER[name] = creator
        return creator

    return register


@register_prefix_cache("naive")
def _create_naive_cache(page_size: int) -> BasePrefixCache:
    from .naive_cache import NaivePrefixCache

    return NaivePrefixCache(page_size)


@register_prefix_cache("radix")
def _create_radix_cache(page_size: int) -> BasePrefixCache:
    from .radix_cache import RadixPrefixCache

    return RadixPrefixCache(page_size)


def create_prefix_cache(cache_type: str, page_size: int) -> BasePrefixCache:
    """按名字造一个前缀缓存；名字来自用户的配置（cache_type），所以报中文错。"""
    if cache_type not in SUPPORTED_CACHE_MANAGER:
        choices = "、".join(repr(name) for name in SUPPORTED_CACHE_MANAGER)
        raise ValueError(f"不支持的前缀缓存类型 {cache_type!r}，可选：{choices}")
    return SUPPORTED_CACHE_MANAGER[cache_type](page_size)


__all__ = [
    "BaseKVCachePool",
    "MHAKVCachePool",
    "create_kvcache_pool",
    "PageAllocator",
    "OutOfPagesError",
    "BaseCacheHandle",
    "BasePrefixCache",
    "InsertResult",
    "MatchResult",
    "SizeInfo",
    "SUPPORTED_CACHE_MANAGER",
    "register_prefix_cache",
    "create_prefix_cache",
]
