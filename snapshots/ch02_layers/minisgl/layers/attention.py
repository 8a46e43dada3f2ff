"""注意力层：把合并的 qkv 切开、做 Qwen3 的 q/k 归一化和 RoPE，然后交给注意力后端。

真正的"softmax(QKᵀ)V"不在这里算。它要读写 KV 池、要知道每个请求缓存了多长，
这些都由注意力后端（minisgl.attention）负责；层只做"每个 token 自己能完成"的那部分。
"""

from __future__ import annotations

import torch

from minisgl.core import get_global_ctx
from minisgl.distributed import get_tp_info, local_kv_heads
from minisgl.utils import div_even

from .base import BaseOP
from .norm import RMSNorm
from .rotary import RotaryEmbedding


class AttentionLayer(BaseOP):
    """一层注意力里"投影之后、输出投影之前"的部分。传入的头数是全模型的，本 rank 只算自己那几个头。"""

    def __init__(
        self, layer_id: int, num_qo_heads: int, num_kv_heads: int, head_dim: int,
        rotary: RotaryEmbedding, q_norm: RMSNorm | None = None, k_norm: RMSNorm | None = None,
    ) -> None:
        tp = get_tp_info()
        self.layer_id, self.head_dim = layer_id, head_dim
        self.local_qo_heads = div_even(num_qo_heads, tp.size)
        self.local_kv_heads = local_kv_heads(num_kv_heads)
        self._rotary = rotary  # 所有层共用一张 cos/sin 表，不是本层的权重
        if q_norm is not None:
            self.q_norm = q_norm
        if k_norm is not None:
            self.k_norm = k_norm

    def forward(self, qkv: torch.Tensor) -> torch.Tensor:
        """qkv: [T, (本地 q 头 + 2 × 本地 KV 头) × head_dim] → 输出 [T, 本地 q 头 × head_dim]。"""
        ctx = get_global_ctx()
        d = self.head_dim
        q, k, v = qkv.split(
            [self.local_qo_heads * d, self.local_kv_heads * d, self.local_kv_heads * d], dim=-1
        )
        q = q.reshape(-1, self.local_qo_heads, d)
        k = k.reshape(-1, self.local_kv_heads, d)
        v = v.reshape(-1, self.local_kv_heads, d)
        if hasattr(self, "q_norm"):  # Qwen3：RoPE 之前对每个头各做一次 RMSNorm
            q, k = self.q_norm.forward(q), self.k_norm.forward(k)
        q, k = self._rotary.forward(ctx.batch.positions, q, k)
        o = ctx.attn_backend.forward(q, k, v, self.layer_id, ctx.batch)
        return o.reshape(-1, self.local_qo_heads * d)
