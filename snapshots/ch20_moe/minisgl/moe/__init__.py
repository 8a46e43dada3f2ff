"""MoE 的专家计算：路由选好每个 token 的 k 个专家之后，让这些专家算、按路由权重加起来。

后端按名字登记在 SUPPORTED_MOE_BACKENDS 里："loop" 是参考实现（一个专家一个专家地算，和 HF 的写法一样），
"fused" 先把 (token, 专家) 对按专家排好、每个专家补齐到整块（moe_align_block_size），再由一个 C++ 算子
按块算完；"auto" 在编得出本书 C++ 算子的 CPU 上选 fused，否则 loop。
"""

from __future__ import annotations

import torch

from minisgl.utils import Registry

from .topk import select_experts  # noqa: I001  先于 loop：layers/moe.py 在 minisgl.layers 初始化到一半时导入它
from .base import BaseMoeBackend
from .fused import FusedMoe, moe_align_block_size
from .loop import LoopMoe

SUPPORTED_MOE_BACKENDS = Registry[type[BaseMoeBackend]]("MoE 后端")
SUPPORTED_MOE_BACKENDS.register("loop")(LoopMoe)
SUPPORTED_MOE_BACKENDS.register("fused")(FusedMoe)


def validate_moe_backend(name: str) -> None:
    """检查用户给的名字："auto" 或一个登记过的名字。不对就抛 ValueError（列出可选的名字）。"""
    if name != "auto":
        SUPPORTED_MOE_BACKENDS[name]


def resolve_moe_backend(name: str, device: torch.device | str) -> str:
    """把 "auto" 换成这台机器上能用的后端：CPU 上编得出 C++ 算子就是 fused，否则 loop。"""
    if name != "auto":
        return name
    from minisgl.kernel import kernels_available

    return "fused" if torch.device(device).type == "cpu" and kernels_available() else "loop"


def create_moe_backend(name: str) -> BaseMoeBackend:
    return SUPPORTED_MOE_BACKENDS[name]()


__all__ = [
    "BaseMoeBackend",
    "FusedMoe",
    "LoopMoe",
    "SUPPORTED_MOE_BACKENDS",
    "create_moe_backend",
    "moe_align_block_size",
    "resolve_moe_backend",
    "select_experts",
    "validate_moe_backend",
]
