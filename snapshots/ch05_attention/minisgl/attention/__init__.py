"""注意力后端：模型的注意力层把 q/k/v 交给它，它负责存 K/V、按页表取 K/V、算注意力。

第 5 章只有一个参考后端 "torch"（torch 的 scaled_dot_product_attention）；第 17 章加入更快的。
"""

from __future__ import annotations

from typing import Callable

import torch

from minisgl.kvcache import BaseKVCachePool

from .base import BaseAttnBackend, BaseAttnMetadata
from .sdpa import SDPAAttnBackend, SDPAAttnMetadata, causal_mask_bottom_right

# 名字 → 构造函数。Engine 按 EngineConfig.attention_backend 从这里选
BACKENDS: dict[str, Callable[[BaseKVCachePool, torch.Tensor], BaseAttnBackend]] = {
    "torch": SDPAAttnBackend,
}


def create_attention_backend(
    name: str, kvcache: BaseKVCachePool, page_table: torch.Tensor
) -> BaseAttnBackend:
    if name not in BACKENDS:
        raise ValueError(f"不认识的注意力后端 {name!r}，可选：{'、'.join(BACKENDS)}")
    return BACKENDS[name](kvcache, page_table)


__all__ = [
    "BACKENDS",
    "BaseAttnBackend",
    "BaseAttnMetadata",
    "SDPAAttnBackend",
    "SDPAAttnMetadata",
    "causal_mask_bottom_right",
    "create_attention_backend",
]
