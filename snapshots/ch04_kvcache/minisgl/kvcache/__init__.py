"""KV 缓存：存 K/V 的池子（mha_pool），以及按页分配池中槽位的分配器（allocator）。"""

from .allocator import OutOfPagesError, PageAllocator, pages_to_slots
from .base import BaseKVCachePool
from .mha_pool import MHAKVCachePool, create_kvcache_pool

__all__ = [
    "BaseKVCachePool",
    "MHAKVCachePool",
    "create_kvcache_pool",
    "PageAllocator",
    "OutOfPagesError",
    "pages_to_slots",
]
