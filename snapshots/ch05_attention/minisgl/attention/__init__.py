"""注意力后端：模型的注意力层把 q/k/v 交给它，它负责存 K/V、按页表取 K/V、算注意力。

后端按名字登记在 SUPPORTED_ATTENTION_BACKENDS 里；"torch" 是参考后端（torch 的 scaled_dot_product_attention）。
"""

from __future__ import annotations

from typing import Callable

import torch

from minisgl.kvcache import BaseKVCachePool
from minisgl.utils import Registry

from .base import BaseAttnBackend, BaseAttnMetadata
from .sdpa import SDPAAttnBackend, SDPAAttnMetadata, causal_mask_bottom_right

# 名字 → 造后端的函数（参数：KV 池、页表）。Engine 按 EngineConfig.attention_backend 从这里选
AttnBackendCreator = Callable[[BaseKVCachePool, torch.Tensor], BaseAttnBackend]
SUPPORTED_ATTENTION_BACKENDS = Registry[AttnBackendCreator]("注意力后端")
SUPPORTED_ATTENTION_BACKENDS.register("torch")(SDPAAttnBackend)


def create_attention_backend(
    name: str, kvcache: BaseKVCachePool, page_table: torch.Tensor
) -> BaseAttnBackend:
    return SUPPORTED_ATTENTION_BACKENDS[name](kvcache, page_table)


__all__ = [
    "SUPPORTED_ATTENTION_BACKENDS",
    "BaseAttnBackend",
    "BaseAttnMetadata",
    "SDPAAttnBackend",
    "SDPAAttnMetadata",
    "causal_mask_bottom_right",
    "create_attention_backend",
]
