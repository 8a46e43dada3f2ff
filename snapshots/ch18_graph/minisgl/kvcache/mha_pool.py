"""多头注意力（MHA/GQA）的 KV 池：所有层的 K 和 V 放在同一块连续内存里。

形状 ``[2, num_layers, num_pages * page_size, local_kv_heads, head_dim]``：
第 0 维 0 是 K、1 是 V；第 2 维是槽位，槽位 = 页号 × page_size + 页内偏移。

为什么是"一整块"而不是每层一个张量：
- 启动时一次分配，大小一目了然，运行中不再向显存分配器要内存；
- ``k_cache(i)``/``v_cache(i)`` 只是切片视图，不拷贝，写进视图就是写进池子；
- 页只是"连续 page_size 个槽位"的记账单位，池子的形状里不需要有"页"这一维。

张量并行时每个 rank 只存自己那几个 KV 头，个数由 ``local_kv_heads`` 决定，
与 LinearQKVMerged 切 qkv_proj 用的是同一个函数：池子里的头和算出来的头一一对应。

写池子（store_kv）是一个登记过的 torch 算子 minisgl::store_kv，并声明它原地改写整个池子：
torch.compile 把它当作一个不透明的调用，不会为了"函数式"把池子整个拷一份（第 18 章）。
"""

from __future__ import annotations

from typing import Protocol

import torch

from minisgl.distributed import local_kv_heads

from .base import BaseKVCachePool


_LIB = torch.library.Library("minisgl", "FRAGMENT")  # 登记跟着这个对象活：留在模块里


def _store_kv(kv_buffer: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              out_loc: torch.Tensor, layer_id: int) -> None:
    kv_buffer[0, layer_id, out_loc] = k
    kv_buffer[1, layer_id, out_loc] = v


def _register_store_kv() -> None:
    """登记 minisgl::store_kv。签名里的 Tensor(a!) 声明它原地改写 kv_buffer；假实现告诉编译器它不返回东西。

    用 torch.library.Library 直接登记，而不是 @torch.library.custom_op：后者每次调用多走一层
    Python 包装，一次要多花二十多微秒，而一步 decode 每层都要调一次。
    """
    _LIB.define("store_kv(Tensor(a!) kv_buffer, Tensor k, Tensor v, Tensor out_loc, int layer_id) -> ()")
    _LIB.impl("store_kv", _store_kv, "CompositeExplicitAutograd")  # CPU、CUDA 都用这一份
    torch.library.register_fake("minisgl::store_kv")(lambda kv_buffer, k, v, out_loc, layer_id: None)


_register_store_kv()


class MHAKVCachePool(BaseKVCachePool):
    """一整块缓冲区 + 按层取视图。"""

    def __init__(
        self,
        num_kv_heads: int,
        num_layers: int,
        head_dim: int,
        num_pages: int,
        page_size: int,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> None:
        assert min(num_kv_heads, num_layers, head_dim, num_pages, page_size) >= 1
        # KV 头比 rank 少时（8 个头、TP=16）每个 rank 存 1 个头的副本
        self.local_kv_heads = local_kv_heads(num_kv_heads)
        self.head_dim = head_dim
        self.num_pages = num_pages
        self.page_size = page_size
        # torch.empty：不花时间清零。正确的代码只会读写过的槽位（页表保证这一点）
        self.kv_buffer = torch.empty(
            (2, num_layers, num_pages * page_size, self.local_kv_heads, head_dim),
            dtype=dtype,
            device=device,
        )
        self._k_buffer = self.kv_buffer[0]  # [num_layers, num_slots, heads, head_dim]，视图
        self._v_buffer = self.kv_buffer[1]

    # ---- 读 ----

    def k_cache(self, layer_id: int) -> torch.Tensor:
        return self._k_buffer[layer_id]

    def v_cache(self, layer_id: int) -> torch.Tensor:
        return self._v_buffer[layer_id]

    # ---- 写 ----

    def store_kv(
        self, k: torch.Tensor, v: torch.Tensor, out_loc: torch.Tensor, layer_id: int
    ) -> None:
        # 内部调用，只断言 CPU 上就知道的形状和 dtype，不读张量内容（在 GPU 上那会是一次同步）
        assert out_loc.dim() == 1 and k.dtype == v.dtype == self.dtype
        assert k.shape == v.shape == (len(out_loc), self.local_kv_heads, self.head_dim)
        # 一次调用写这一层的 K 和 V：传整个池子和层号，算子里自己取那两块
        torch.ops.minisgl.store_kv(self.kv_buffer, k, v, out_loc, layer_id)

    # ---- 属性 ----

    @property
    def num_layers(self) -> int:
        return self.kv_buffer.shape[1]

    @property
    def num_slots(self) -> int:
        return self.kv_buffer.shape[2]

    @property
    def dtype(self) -> torch.dtype:
        return self.kv_buffer.dtype

    @property
    def device(self) -> torch.device:
        return self.kv_buffer.device

    @property
    def nbytes(self) -> int:
        """整个池子占多少字节（K 和 V、所有层）。"""
        return self.kv_buffer.numel() * self.kv_buffer.element_size()

    def __repr__(self) -> str:
        return (
            f"MHAKVCachePool(layers={self.num_layers}, pages={self.num_pages}, "
            f"page_size={self.page_size}, local_kv_heads={self.local_kv_heads}, "
            f"head_dim={self.head_dim}, dtype={self.dtype}, device={self.device})"
        )


class _KVShape(Protocol):
    """create_kvcache_pool 只用到模型配置的这三个字段（第 3 章的 ModelConfig 都有）。"""

    num_kv_heads: int
    num_layers: int
    head_dim: int


def create_kvcache_pool(
    model_config: _KVShape,
    num_pages: int,
    page_size: int,
    dtype: torch.dtype,
    device: torch.device | str,
) -> MHAKVCachePool:
    """按模型配置建 KV 池：KV 头数、层数、head_dim 都从配置里读。"""
    return MHAKVCachePool(
        num_kv_heads=model_config.num_kv_heads,
        num_layers=model_config.num_layers,
        head_dim=model_config.head_dim,
        num_pages=num_pages,
        page_size=page_size,
        dtype=dtype,
        device=device,
    )
