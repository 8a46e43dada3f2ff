"""线性层的权重怎么乘：torch 的 F.linear、本书的 C++ GEMV，或者按组量化的 int8 / int4 权重。

decode 时 x 只有几行，y = x @ W.T 的时间几乎全花在把 W 从内存读进来上：本书的 C++ 算子
（kernel/csrc/linear.cpp）把权重只读一遍、用满几个核的内存带宽；量化让要读的字节变少。
行多时（prefill、大批 decode）是算力活，交给 torch 的 GEMM。

量化按组：每行相邻的 32 个权重一组，共用一个缩放 d（int4 还有一个最小值 m）。
int8：q = round(w / d) ∈ [-127, 127]，d = 组内最大绝对值 / 127，w ≈ d·q。
int4：q = round((w - m) / d) ∈ [0, 15]，m = 组内最小值，d = (最大值 - m) / 15，w ≈ d·q + m。
组只在一行之内：q/k/v、gate/up 合并成一个层，或者按列切给几个 TP rank，每个数的量化结果都不变。
量化的权重乘的是按同样的组量化成 int8 的 x（round_activations）：C++ 里一组的点积就全是整数乘加。
行多时也先这样取整 x，再乘解回来的权重：不管走哪条路，量化的层算的都是 round_activations(x) @ W.T。

Engine 加载完权重后调用 prepare_linear_layers，给每个线性层和 LM head 装上一个"怎么乘"的对象。
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from minisgl.kernel import kernels_available, load_kernels
from minisgl.utils import init_logger

from .base import BaseOP
from .embedding import ParallelLMHead
from .linear import _LinearTPImpl

logger = init_logger(__name__)

GROUP = 32  # 量化分组的大小（linear.cpp 的 kGroup）
SMALL_BATCH = 8  # x 不超过这么多行时走 C++ GEMV（linear.cpp 的 kMaxRows）
QUANTIZATIONS = ("int8", "int4")
CPU_KERNELS = ("auto", "torch", "cpp")


def quantize_int8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w [N, K] → (q int8 [N, K], d float32 [N, K/32])。"""
    n, k = w.shape
    groups = w.float().view(n, k // GROUP, GROUP)
    d = groups.abs().amax(dim=-1) / 127
    q = torch.round(groups / d.clamp_min(1e-30).unsqueeze(-1)).clamp(-127, 127)
    return q.to(torch.int8).view(n, k).contiguous(), d.contiguous()


def dequantize_int8(q: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    n, k = q.shape
    return (q.view(n, k // GROUP, GROUP).float() * d.unsqueeze(-1)).view(n, k)


def quantize_int4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """w [N, K] → (q uint8 [N, K/2], d [N, K/32], m [N, K/32])。

    两个 4 位数装进一个字节：第 j 个字节的低 4 位是第 j 个数，高 4 位是第 j + K/2 个数。
    这样 C++ 里解一组 32 个数是对连续 32 个字节做同一种位运算，编译器能直接向量化。
    """
    n, k = w.shape
    groups = w.float().view(n, k // GROUP, GROUP)
    m = groups.amin(dim=-1)
    d = (groups.amax(dim=-1) - m) / 15
    q = torch.round((groups - m.unsqueeze(-1)) / d.clamp_min(1e-30).unsqueeze(-1)).clamp(0, 15)
    q = q.to(torch.uint8).view(n, k)
    packed = q[:, : k // 2] | (q[:, k // 2:] << 4)
    return packed.contiguous(), d.contiguous(), m.contiguous()


def quantize_activations(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] → (xq int8 [M, K], dx float32 [M, K/32])：每 32 个一组，dx = 组内最大绝对值 / 127。

    和 linear.cpp 的 QuantizedX 同样的算法（乘 1/127、乘倒数、四舍六入五成双），取整的结果逐个相同。
    """
    m, k = x.shape
    groups = x.float().reshape(m, k // GROUP, GROUP)
    dx = groups.abs().amax(dim=-1) * (1.0 / 127.0)
    inv = torch.where(dx > 0, 1.0 / dx, torch.zeros_like(dx))
    xq = torch.round(groups * inv.unsqueeze(-1))
    return xq.to(torch.int8).view(m, k), dx


def round_activations(x: torch.Tensor) -> torch.Tensor:
    """x 量化成 int8 再解回 float32：量化的线性层实际乘的那个 x。"""
    xq, dx = quantize_activations(x)
    m, k = xq.shape
    return (xq.view(m, k // GROUP, GROUP).float() * dx.unsqueeze(-1)).view(m, k)


def dequantize_int4(packed: torch.Tensor, d: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    n, k = packed.shape[0], packed.shape[1] * 2
    q = torch.cat([packed & 0xF, packed >> 4], dim=1).float()
    return (q.view(n, k // GROUP, GROUP) * d.unsqueeze(-1) + m.unsqueeze(-1)).view(n, k)


class DenseMatmul:
    """没量化的 float32 权重：行少时走 C++ GEMV（权重读一遍），行多时交给 torch 的 GEMM。"""

    def __init__(self, weight: torch.Tensor) -> None:
        self.weight = weight
        self.gemv_ok = weight.shape[1] % GROUP == 0  # C++ 按 32 个一组乘：其他宽度交给 torch

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] <= SMALL_BATCH and self.gemv_ok:
            return torch.ops.minisgl.linear_f32(x, self.weight)
        return F.linear(x, self.weight)


class Int8Matmul:
    """int8 分组量化的权重：行少时 C++ 整数点积；行多时权重解回 float32、x 同样取整，交给 torch 的 GEMM。"""

    def __init__(self, weight: torch.Tensor) -> None:
        self.q, self.d = quantize_int8(weight)

    def dequantize(self) -> torch.Tensor:
        return dequantize_int8(self.q, self.d)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] <= SMALL_BATCH:
            return torch.ops.minisgl.linear_int8(x, self.q, self.d)
        return F.linear(round_activations(x), self.dequantize())


class Int4Matmul:
    """int4 分组量化的权重（每组还有一个最小值），用法同 Int8Matmul。"""

    def __init__(self, weight: torch.Tensor) -> None:
        self.q, self.d, self.m = quantize_int4(weight)

    def dequantize(self) -> torch.Tensor:
        return dequantize_int4(self.q, self.d, self.m)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] <= SMALL_BATCH:
            return torch.ops.minisgl.linear_int4(x, self.q, self.d, self.m)
        return F.linear(round_activations(x), self.dequantize())


def _matmul_for(weight: torch.Tensor, kind: str | None) -> DenseMatmul | Int8Matmul | Int4Matmul:
    if kind is None:
        return DenseMatmul(weight)
    return Int8Matmul(weight) if kind == "int8" else Int4Matmul(weight)


def _linear_ops(op: BaseOP, name: str = "") -> list[tuple[str, _LinearTPImpl | ParallelLMHead]]:
    found = [(name, op)] if isinstance(op, (_LinearTPImpl, ParallelLMHead)) else []
    for child_name, child in op.named_children():
        if isinstance(child, BaseOP):
            found += _linear_ops(child, f"{name}.{child_name}" if name else child_name)
    return found


def quantization_problem(weight_shape: tuple[int, int], kind: str) -> str | None:
    """这块本地权重能不能按 kind 量化；不能时说出原因（K 要是组大小的倍数，int4 还要能对半分）。"""
    k = weight_shape[1]
    need = GROUP if kind == "int8" else 2 * GROUP
    return None if k % need == 0 else f"每行 {k} 个数，不是 {need} 的倍数"


def prepare_linear_layers(model: BaseOP, quantization: str | None) -> None:
    """给模型里每个线性层和 LM head 装上 C++ GEMV；quantization 给了就把权重换成量化的。

    量化后线性层的 float32 权重就删掉（省下内存）；LM head 和词嵌入共用权重时，嵌入那份不动
    （查表还要用），LM head 另存一份 int8。LM head 在两种量化下都用 int8：词表的 logits 对误差
    最敏感，llama.cpp 的 Q4_1 也不把输出层压到 4 位。
    """
    assert quantization is None or quantization in QUANTIZATIONS
    layers = _linear_ops(model)
    for name, op in layers:  # 先全部检查，再动手：不会量化到一半才报错
        kind = "int8" if isinstance(op, ParallelLMHead) and quantization else quantization
        if kind is not None and (problem := quantization_problem(tuple(op.matmul_weight().shape), kind)):
            raise ValueError(f"{name} 不能做 {kind} 量化：{problem}")
    for _, op in layers:
        kind = "int8" if isinstance(op, ParallelLMHead) and quantization else quantization
        op.use_matmul(_matmul_for(op.matmul_weight(), kind), drop_weight=kind is not None)


def resolve_cpu_kernels(name: str, quantization: str | None, device: torch.device, dtype: torch.dtype) -> str:
    """把 "auto" 换成 "torch" 或 "cpp"；要 cpp（或量化）却做不到时抛错，说清原因。"""
    cpu_float32 = device.type == "cpu" and dtype == torch.float32
    if name == "torch":
        return "torch"
    if name == "cpp" or quantization is not None:
        if not cpu_float32:
            raise ValueError(f"本书的 C++ 算子（和量化）只有 CPU、float32 的版本，这里是 {device.type}、{dtype}")
        load_kernels()  # 编不出来时抛 KernelsUnavailable，带一句原因
        return "cpp"
    if cpu_float32 and kernels_available():
        return "cpp"
    if cpu_float32:
        logger.warning("C++ 算子编不出来，线性层和 RMSNorm 退回 torch 的算子（decode 慢一些）")
    return "torch"
