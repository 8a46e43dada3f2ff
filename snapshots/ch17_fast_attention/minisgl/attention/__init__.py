"""注意力后端：模型的注意力层把 q/k/v 交给它，它负责存 K/V、按页表取 K/V、算注意力。

后端按名字登记在 SUPPORTED_ATTENTION_BACKENDS 里："torch" 是参考后端（SDPA，先按页表取出 K/V），
"paged" 是隔着页表直接读 KV 池的 C++ 算子（CPU）。和上游一样，"prefill 的,decode 的" 两个名字
组成混合后端；"auto" 按设备挑一个。
"""

from __future__ import annotations

from typing import Callable

import torch

from minisgl.kernel import kernels_available
from minisgl.kvcache import BaseKVCachePool
from minisgl.utils import Registry, init_logger, is_cuda

from .base import BaseAttnBackend, BaseAttnMetadata, HybridBackend
from .paged import PagedAttnBackend, PagedAttnMetadata
from .sdpa import SDPAAttnBackend, SDPAAttnMetadata, causal_mask_bottom_right

logger = init_logger(__name__)

# 名字 → 造后端的函数（参数：KV 池、页表）。Engine 按 EngineConfig.attention_backend 从这里选
AttnBackendCreator = Callable[[BaseKVCachePool, torch.Tensor], BaseAttnBackend]
SUPPORTED_ATTENTION_BACKENDS = Registry[AttnBackendCreator]("注意力后端")
SUPPORTED_ATTENTION_BACKENDS.register("torch")(SDPAAttnBackend)
SUPPORTED_ATTENTION_BACKENDS.register("paged")(PagedAttnBackend)


def validate_attention_backend(name: str) -> None:
    """检查用户给的名字："auto"、一个登记过的名字，或者 "prefill 的,decode 的"。不对就抛 ValueError。"""
    if name == "auto":
        return
    parts = name.split(",")
    if len(parts) > 2:
        raise ValueError(f"注意力后端 {name!r} 最多两个名字：prefill 的,decode 的")
    for part in parts:
        SUPPORTED_ATTENTION_BACKENDS[part]  # 名字不对时它报错，并列出可选的名字


def resolve_attention_backend(name: str, device: torch.device | str) -> str:
    """把 "auto" 换成这台机器上最合适的后端：CPU 上 prefill 用 SDPA、decode 用 paged（要能编出 C++ 算子）。"""
    validate_attention_backend(name)
    if name != "auto":
        return name
    if is_cuda(device):
        return "torch"
    if kernels_available():
        return "torch,paged"
    logger.warning("C++ 算子编不出来，注意力后端退回 torch（decode 每步多拷一份 K/V，慢一些）")
    return "torch"


def create_attention_backend(
    name: str, kvcache: BaseKVCachePool, page_table: torch.Tensor
) -> BaseAttnBackend:
    name = resolve_attention_backend(name, page_table.device)
    prefill, _, decode = name.partition(",")
    if decode and decode != prefill:
        return HybridBackend(SUPPORTED_ATTENTION_BACKENDS[prefill](kvcache, page_table),
                             SUPPORTED_ATTENTION_BACKENDS[decode](kvcache, page_table))
    return SUPPORTED_ATTENTION_BACKENDS[prefill](kvcache, page_table)


__all__ = [
    "SUPPORTED_ATTENTION_BACKENDS",
    "BaseAttnBackend",
    "BaseAttnMetadata",
    "HybridBackend",
    "PagedAttnBackend",
    "PagedAttnMetadata",
    "SDPAAttnBackend",
    "SDPAAttnMetadata",
    "causal_mask_bottom_right",
    "create_attention_backend",
    "resolve_attention_backend",
    "validate_attention_backend",
]
