"""Llama 系模型共用的两个积木：门控 MLP 和带 RoPE 的注意力块。"""

from __future__ import annotations

import torch

from minisgl.layers import (
    AttentionLayer,
    BaseOP,
    LinearColParallelMerged,
    LinearOProj,
    LinearQKVMerged,
    LinearRowParallel,
    RMSNorm,
    get_rope,
    silu_and_mul,
)

from .config import ModelConfig


class GatedMLP(BaseOP):
    """down(silu(gate(x)) * up(x))：gate/up 合并成一个列并行层，down 是行并行层，整块只通信一次。"""

    def __init__(self, config: ModelConfig) -> None:
        self.gate_up_proj = LinearColParallelMerged(
            config.hidden_size, [config.intermediate_size, config.intermediate_size]
        )
        self.down_proj = LinearRowParallel(config.intermediate_size, config.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj.forward(silu_and_mul(self.gate_up_proj.forward(x)))


class RopeAttn(BaseOP):
    """qkv 投影 → (q/k 归一化) → RoPE → 注意力后端 → o 投影。

    has_qk_norm=True 是 Qwen3：q、k 在 RoPE 之前按头做 RMSNorm，权重名 q_norm / k_norm。
    """

    def __init__(self, config: ModelConfig, layer_id: int, has_qk_norm: bool = False) -> None:
        c = config
        self.qkv_proj = LinearQKVMerged(
            c.hidden_size, c.head_dim, c.num_qo_heads, c.num_kv_heads, has_bias=c.attention_bias
        )
        rope = get_rope(c.head_dim, c.head_dim, c.max_position_embeddings, c.rope_theta)
        q_norm = RMSNorm(c.head_dim, c.rms_norm_eps) if has_qk_norm else None
        k_norm = RMSNorm(c.head_dim, c.rms_norm_eps) if has_qk_norm else None
        # HF 的权重名是 self_attn.q_norm，所以把它们挂在本块上，AttentionLayer 只借用
        if has_qk_norm:
            self.q_norm, self.k_norm = q_norm, k_norm
        self._attn = AttentionLayer(
            layer_id, c.num_qo_heads, c.num_kv_heads, c.head_dim, rope, q_norm, k_norm
        )
        # HF 的 Llama / Qwen3 用同一个 attention_bias 开关管 q、k、v、o 四个投影
        self.o_proj = LinearOProj(c.num_qo_heads * c.head_dim, c.hidden_size, has_bias=c.attention_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.o_proj.forward(self._attn.forward(self.qkv_proj.forward(x)))
