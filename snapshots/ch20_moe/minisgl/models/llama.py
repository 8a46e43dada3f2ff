"""Llama 架构（SmolLM2 就是它）：嵌入 → N 个解码层 → 最后的 RMSNorm → LM head。

属性名和 Hugging Face 的权重名一一对应（model.layers.3.self_attn.qkv_proj.weight……），
只是 q/k/v 合成了 qkv_proj、gate/up 合成了 gate_up_proj，由加载器在读文件时合并。
"""

from __future__ import annotations

import torch

from minisgl.core import get_global_ctx
from minisgl.layers import BaseOP, OPList, ParallelLMHead, RMSNormFused, VocabParallelEmbedding

from .base import BaseLLMModel
from .config import ModelConfig
from .utils import GatedMLP, RopeAttn


class LlamaDecoderLayer(BaseOP):
    has_qk_norm = False  # Qwen3 的解码层只改这一处

    def __init__(self, config: ModelConfig, layer_id: int) -> None:
        self.input_layernorm = RMSNormFused(config.hidden_size, config.rms_norm_eps)
        self.self_attn = RopeAttn(config, layer_id, has_qk_norm=self.has_qk_norm)
        self.post_attention_layernorm = RMSNormFused(config.hidden_size, config.rms_norm_eps)
        self.mlp = self.make_mlp(config, layer_id)

    def make_mlp(self, config: ModelConfig, layer_id: int) -> BaseOP:
        """这一层的 MLP。稠密模型每层都是门控 MLP；MoE 模型的解码层覆盖它，按层号挑 MoE 或稠密。"""
        return GatedMLP(config)

    def forward(
        self, x: torch.Tensor, residual: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # 残差不在层末尾加，而是推迟到下一次归一化里一起加（RMSNormFused）
        x, residual = self.input_layernorm.forward(x, residual)
        x = self.self_attn.forward(x)
        x, residual = self.post_attention_layernorm.forward(x, residual)
        return self.mlp.forward(x), residual


class LlamaModel(BaseOP):
    decoder_layer = LlamaDecoderLayer

    def __init__(self, config: ModelConfig) -> None:
        self.embed_tokens = VocabParallelEmbedding(config.vocab_size, config.hidden_size)
        self.layers = OPList([self.decoder_layer(config, i) for i in range(config.num_layers)])
        self.norm = RMSNormFused(config.hidden_size, config.rms_norm_eps)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens.forward(input_ids)
        residual = None
        for layer in self.layers:
            x, residual = layer.forward(x, residual)
        return self.norm.forward(x, residual)[0]  # 最后一次把残差加回来再归一化


class LlamaForCausalLM(BaseLLMModel):
    model_class = LlamaModel

    def __init__(self, config: ModelConfig) -> None:
        self.model = self.model_class(config)
        tied = self.model.embed_tokens if config.tie_word_embeddings else None
        self.lm_head = ParallelLMHead(config.vocab_size, config.hidden_size, tied_embedding=tied)

    def forward(self) -> torch.Tensor:
        hidden = self.model.forward(get_global_ctx().batch.input_ids)
        return self.lm_head.forward(hidden)
