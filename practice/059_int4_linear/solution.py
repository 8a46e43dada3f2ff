"""练习 059 · int4 权重的线性层：整行对半打包，按组边解边乘（第 19 章 自定义算子）

参考答案。
"""

from __future__ import annotations

import torch

GROUP = 32  # 一组几个数


def quantize_int4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """w float32 [N, K]（K 是 64 的倍数）→ (packed uint8 [N, K/2], d float32 [N, K/32], m float32 [N, K/32])。
    第 j 个字节的低 4 位是第 j 个数，高 4 位是第 j + K/2 个数。坏参数抛 ValueError。"""
    if w.dim() != 2 or w.dtype != torch.float32 or w.shape[1] == 0 or w.shape[1] % (2 * GROUP) != 0:
        raise ValueError(f"w 要是 float32 的 [N, K]，K 是 {2 * GROUP} 的正整数倍，收到 {tuple(w.shape)} {w.dtype}")
    n, k = w.shape
    groups = w.reshape(n, k // GROUP, GROUP)
    m = groups.amin(dim=-1)
    d = (groups.amax(dim=-1) - m) / 15
    q = torch.round((groups - m[..., None]) / d.clamp_min(1e-30)[..., None]).clamp(0, 15)
    q = q.to(torch.uint8).reshape(n, k)
    packed = q[:, : k // 2] | (q[:, k // 2:] << 4)
    return packed.contiguous(), d.contiguous(), m.contiguous()


def _check_weight(packed: torch.Tensor, d: torch.Tensor, m: torch.Tensor) -> tuple[int, int]:
    if packed.dim() != 2 or packed.dtype != torch.uint8 or packed.shape[1] == 0 or packed.shape[1] % GROUP != 0:
        raise ValueError(f"packed 要是 uint8 的 [N, K/2]，K/2 是 {GROUP} 的正整数倍，收到 {tuple(packed.shape)} {packed.dtype}")
    n, k = packed.shape[0], packed.shape[1] * 2
    for name, t in (("d", d), ("m", m)):
        if t.dtype != torch.float32 or tuple(t.shape) != (n, k // GROUP):
            raise ValueError(f"{name} 要是 float32 的 [{n}, {k // GROUP}]，收到 {tuple(t.shape)} {t.dtype}")
    return n, k


def dequantize_int4(packed: torch.Tensor, d: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """解回 float32 [N, K]：w = d·q + m。坏参数抛 ValueError。"""
    n, k = _check_weight(packed, d, m)
    q = torch.cat([packed & 0xF, packed >> 4], dim=1).float()
    return (q.view(n, k // GROUP, GROUP) * d[..., None] + m[..., None]).view(n, k)


def linear_int4(x: torch.Tensor, packed: torch.Tensor, d: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """y = x @ W.T，W 是 (packed, d, m) 表示的 int4 权重；x float32 [M, K]，M ≥ 1。
    一次只解一组 [N, 32]，不造出整块 float32 的 [N, K]。坏参数抛 ValueError。"""
    n, k = _check_weight(packed, d, m)
    if x.dim() != 2 or x.dtype != torch.float32 or x.shape[1] != k or x.shape[0] < 1:
        raise ValueError(f"x 要是 float32 的 [M, {k}]，M ≥ 1，收到 {tuple(x.shape)} {x.dtype}")
    groups, half = k // GROUP, k // GROUP // 2  # 前一半的组在低 4 位里，后一半的组在高 4 位里
    y = x.new_zeros(x.shape[0], n)
    for g in range(groups):
        b = packed[:, (g % half) * GROUP: (g % half + 1) * GROUP]  # [N, 32] 个字节
        q = (b & 0xF) if g < half else (b >> 4)
        w = q.float() * d[:, g: g + 1] + m[:, g: g + 1]  # 这一组的权重 [N, 32]
        y += x[:, g * GROUP: (g + 1) * GROUP] @ w.T
    return y
