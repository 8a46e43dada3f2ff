"""Qwen3-MoE（例如 Qwen3-30B-A3B）：和稠密的 Qwen3 只差 MLP——大多数层换成“路由 + 一组专家”。

路由（gate）是一个不切的线性层 [E, hidden]，每个 rank 都算出同样的 logits、选出同样的专家；
专家们在 MoELayer 里，怎么分到各个 rank 上见 layers/moe.py。
"""

from __future__ import annotations

import torch

from minisgl.layers import BaseOP, LinearReplicated, MoELayer

from .config import ModelConfig
from .qwen3 import Qwen3DecoderLayer, Qwen3ForCausalLM, Qwen3Model


class Qwen3MoeSparseBlock(BaseOP):
    """权重名和 HF 一致：mlp.gate.weight（路由），mlp.experts.*（专家，加载时叠成两个三维张量）。"""

    def __init__(self, config: ModelConfig) -> None:
        self.gate = LinearReplicated(config.hidden_size, config.num_experts)
        self.experts = MoELayer(config.num_experts, config.num_experts_per_tok, config.hidden_size,
                                config.moe_intermediate_size, renormalize=config.norm_topk_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.experts.forward(x, self.gate.forward(x))


class Qwen3MoeDecoderLayer(Qwen3DecoderLayer):
    def make_mlp(self, config: ModelConfig, layer_id: int) -> BaseOP:
        if config.is_moe_layer(layer_id):
            return Qwen3MoeSparseBlock(config)
        return super().make_mlp(config, layer_id)  # mlp_only_layers 等：稠密 MLP


class Qwen3MoeModel(Qwen3Model):
    decoder_layer = Qwen3MoeDecoderLayer


class Qwen3MoeForCausalLM(Qwen3ForCausalLM):
    model_class = Qwen3MoeModel
