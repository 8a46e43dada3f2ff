"""线性层的权重怎么乘：torch 的 F.linear、本书的 C++ GEMV，或者按组量化的 int8 / int4 权重。

decode 时 x 只有几行，y = x @ W.T 的时间几乎全花在把 W 从内存读进来上：本书的 C++ 算子
（kernel/csrc/linear.cpp）把权重只读一遍、用满几个核的内存带宽；量化让要读的字节变少。
float32 的权重行多时（prefill、大批 decode）是算力活，交给 torch 的 GEMM；量化的权重不管几行都走
C++：每 8 行一趟，一块权重读进缓存后被各趟复用，整数乘加也比 float32 的 GEMM 快。

量化按组：每行相邻的 32 个权重一组，共用一个缩放 d（int4 还有一个最小值 m）。
int8：q = round(w / d) ∈ [-127, 127]，d = 组内最大绝对值 / 127，w ≈ d·q。
int4：q = round((w - m) / d) ∈ [0, 15]，m = 组内最小值，d = (最大值 - m) / 15，w ≈ d·q + m。
d、m 和 GGUF 里一样存成 float16（先取到 float16 的格点上，再用它们算 q）：每组 32 个数只多 2 或 4 字节。
组只在一行之内：q/k/v、gate/up 合并成一个层，或者按列切给几个 TP rank，每个数的量化结果都不变。
量化的权重乘的是按同样的组量化成 int8 的 x（round_activations）：C++ 里一组的点积就全是整数乘加，
算的是 round_activations(x) @ 解回来的 W.T（测试拿它当参照）。

C++ 算子读的是“16 行交错”的存法（interleave_int8 / interleave_int4，布局见 linear.cpp 开头）：
16 行的同一组挨着放，一条向量指令同时推进 16 行；d、m 跟在各自那块权重后面，整层只有一条字节流。

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
SMALL_BATCH = 8  # float32：x 不超过这么多行时走 C++ GEMV，更多行交给 torch（linear.cpp 的 kMaxRows）
LANES = 16  # 交错存放的行数（linear.cpp 的 kLanes）
QUANTIZATIONS = ("int8", "int4")
CPU_KERNELS = ("auto", "torch", "cpp")


def to_half_grid(v: torch.Tensor) -> torch.Tensor:
    """取到最近的 float16 上（dtype 仍是 float32）：缩放和最小值按 float16 存，量化时就用存下来的那个值。"""
    return v.half().float()


def quantize_int8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w [N, K] → (q int8 [N, K], d float32 [N, K/32])。"""
    n, k = w.shape
    groups = w.float().view(n, k // GROUP, GROUP)
    d = to_half_grid(groups.abs().amax(dim=-1) / 127)
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
    m = to_half_grid(groups.amin(dim=-1))
    d = to_half_grid((groups.amax(dim=-1) - m) / 15)
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


def _pad_rows(t: torch.Tensor) -> torch.Tensor:
    """补 0 行到 16 的倍数（最后一块不满 16 行时）。"""
    pad = (-t.shape[0]) % LANES
    return torch.cat([t, t.new_zeros(pad, *t.shape[1:])]) if pad else t


def _halves_by_block(v: torch.Tensor) -> torch.Tensor:
    """[N, G] 的 d 或 m → 每块 16 行的 float16，按字节 [ceil(N/16), G, 32]。"""
    v = _pad_rows(v).half()
    return v.view(-1, LANES, v.shape[1]).transpose(1, 2).contiguous().view(torch.uint8)


def interleave_int8(q: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """(q int8 [N, K], d [N, K/32]) → uint8 [ceil(N/16), K/32, 16·32 + 32]：一块是 16 行的同一组。

    块里第 s 段 64 字节（s = 0..7）的第 j 个 32 位格子，是第 j 行这一组的第 4s..4s+3 个数；后面是 16 个 d。
    """
    q = _pad_rows(q)
    nb, g = q.shape[0] // LANES, q.shape[1] // GROUP
    cells = q.view(nb, LANES, g, 8, 4).permute(0, 2, 3, 1, 4).reshape(nb, g, 8 * LANES * 4)  # [块, 组, s, 行, 4]
    return torch.cat([cells.view(torch.uint8), _halves_by_block(d)], dim=2).contiguous()


def interleave_int4(packed: torch.Tensor, d: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """(quantize_int4 的三个张量) → uint8 [ceil(N/16), K/32, 16·16 + 64]：一块是 16 行的同一组。

    块里第 s 段 64 字节（s = 0..3）的第 j 个格子有 4 个字节：低 4 位是第 j 行这一组的第 4s..4s+3 个数，
    高 4 位是第 16+4s..16+4s+3 个数；后面是 16 个 d、16 个 m。
    """
    q = _pad_rows(torch.cat([packed & 0xF, packed >> 4], dim=1))  # 拆回每个数一个字节 [N, K]
    nb, g = q.shape[0] // LANES, q.shape[1] // GROUP
    q = q.view(nb, LANES, g, 2, 4, 4)  # [块, 行, 组, 前/后 16 个, s, 4]
    cells = (q[:, :, :, 0] | (q[:, :, :, 1] << 4)).permute(0, 2, 3, 1, 4).reshape(nb, g, 4 * LANES * 4)
    return torch.cat([cells, _halves_by_block(d), _halves_by_block(m)], dim=2).contiguous()


def _halves_from_blocks(raw: torch.Tensor, n: int) -> torch.Tensor:
    """[块, G, 32] 字节 → [N, G] float32：_halves_by_block 的逆。"""
    nb, g = raw.shape[:2]
    return raw.contiguous().view(torch.float16).view(nb, g, LANES).transpose(1, 2).reshape(nb * LANES, g)[:n].float()


def deinterleave_int8(blocks: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """interleave_int8 的逆：→ (q [N, K], d [N, K/32])。"""
    nb, g = blocks.shape[:2]
    cells = blocks[:, :, : 8 * LANES * 4].contiguous().view(torch.int8).view(nb, g, 8, LANES, 4)
    q = cells.permute(0, 3, 1, 2, 4).reshape(nb * LANES, g * GROUP)[:n]
    return q.contiguous(), _halves_from_blocks(blocks[:, :, 8 * LANES * 4:], n)


def deinterleave_int4(blocks: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """interleave_int4 的逆：→ (packed [N, K/2], d [N, K/32], m [N, K/32])。"""
    nb, g = blocks.shape[:2]
    cells = blocks[:, :, : 4 * LANES * 4].reshape(nb, g, 4, LANES, 4).permute(0, 3, 1, 2, 4)  # [块, 行, 组, s, 4]
    q = torch.stack([cells & 0xF, cells >> 4], dim=3).reshape(nb * LANES, g * GROUP)[:n]  # 每组先前 16 个再后 16 个
    k = q.shape[1]
    packed = (q[:, : k // 2] | (q[:, k // 2:] << 4)).contiguous()
    halves = blocks[:, :, 4 * LANES * 4:]
    return packed, _halves_from_blocks(halves[:, :, :32], n), _halves_from_blocks(halves[:, :, 32:], n)


class Int8Matmul:
    """int8 分组量化的权重（16 行交错的存法），C++ 整数点积；x 有几行都行。"""

    def __init__(self, weight: torch.Tensor) -> None:
        self.n = weight.shape[0]
        self.blocks = interleave_int8(*quantize_int8(weight))

    def dequantize(self) -> torch.Tensor:
        return dequantize_int8(*deinterleave_int8(self.blocks, self.n))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.minisgl.linear_int8(x, self.blocks, self.n)


class Int4Matmul:
    """int4 分组量化的权重（每组还有一个最小值），用法同 Int8Matmul。"""

    def __init__(self, weight: torch.Tensor) -> None:
        self.n = weight.shape[0]
        self.blocks = interleave_int4(*quantize_int4(weight))

    def dequantize(self) -> torch.Tensor:
        return dequantize_int4(*deinterleave_int4(self.blocks, self.n))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.minisgl.linear_int4(x, self.blocks, self.n)


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
