"""旋转位置编码（RoPE），"旋转一半"（neox）的写法，与 HF 的 Llama / Qwen3 相同。

把每个头的向量分成前后两半 (x1, x2)，第 i 对 (x1[i], x2[i]) 在位置 p 旋转角度 p·θ_i，
θ_i = base^(-2i / rotary_dim)。cos / sin 按位置预先算好一张表，前向时按 positions 取行：
批里的 token 来自不同请求、位置各不相同（decode 时可能是 [17, 3, 250]），不能假设是 0..T-1。
"""

from __future__ import annotations

import torch

from .base import BaseOP


class RotaryEmbedding(BaseOP):
    def __init__(self, head_dim: int, rotary_dim: int, max_position: int, base: float) -> None:
        assert rotary_dim <= head_dim and rotary_dim % 2 == 0, (rotary_dim, head_dim)
        self.head_dim, self.rotary_dim = head_dim, rotary_dim
        # 显式放在 CPU、用 float32：模型可能正在 meta 设备上搭架子，这张表却必须是真数据
        f32 = dict(dtype=torch.float32, device="cpu")
        inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, **f32) / rotary_dim))
        angles = torch.outer(torch.arange(max_position, **f32), inv_freq)
        # 下划线开头：这是算出来的缓存，不是要从文件加载的权重
        self._cos = angles.cos()  # [max_position, rotary_dim / 2]
        self._sin = angles.sin()

    def forward(
        self, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """q: [T, Hq, head_dim]，k: [T, Hkv, head_dim]，positions: [T]。返回旋转后的新张量。"""
        # 表不在这里搬：GPU 上那是第一步里一次隐藏的同步，图捕获时更不许。见 rope_tables_to
        assert self._cos.device == q.device, f"RoPE 表在 {self._cos.device} 上，q 在 {q.device} 上"
        cos = self._cos[positions].unsqueeze(1)  # [T, 1, rotary_dim / 2]，对所有头广播
        sin = self._sin[positions].unsqueeze(1)
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin)

    def _rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        rot, rest = x[..., : self.rotary_dim], x[..., self.rotary_dim :]
        x1, x2 = rot.float().chunk(2, dim=-1)
        # 复数乘法 (x1 + i·x2)(cos + i·sin) 的实部与虚部
        out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)
        return torch.cat([out, rest], dim=-1) if rest.numel() else out


_ROPES: dict[tuple[int, int, int, float], RotaryEmbedding] = {}


def get_rope(head_dim: int, rotary_dim: int, max_position: int, base: float) -> RotaryEmbedding:
    """同样参数的 RoPE 表全模型只算一份：所有层共用。"""
    key = (head_dim, rotary_dim, max_position, base)
    if key not in _ROPES:
        _ROPES[key] = RotaryEmbedding(*key)
    return _ROPES[key]


def rope_tables_to(device: torch.device | str) -> None:
    """把 get_rope 算过的每张 cos/sin 表搬到 device 上。表不是权重，不随 load_state_dict 上卡，
    所以加载模型的一方（Engine）加载完权重就调一次。"""
    for rope in _ROPES.values():
        rope._cos, rope._sin = rope._cos.to(device), rope._sin.to(device)
