"""KV 缓存：存 K/V 的池子（mha_pool），以及按页分配池中槽位的分配器（allocator）。

第 4 章只有这两样。前缀缓存（第 8、9 章）会在这里再加上缓存句柄和 radix 树。
"""

from .allocator import OutOfPagesError, PageAllocator
from .base import BaseKVCachePool
from .mha_pool import MHAKVCachePool, create_kvcache_pool

__all__ = [
    "BaseKVCachePool",
    "MHAKVCachePool",
    "create_kvcache_pool",
    "PageAllocator",
    "OutOfPagesError",
]
