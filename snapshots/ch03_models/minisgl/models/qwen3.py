"""Qwen3（稠密版）：和 Llama 只差一处——注意力里 q、k 在 RoPE 之前各做一次按头的 RMSNorm。"""

from __future__ import annotations

from .llama import LlamaDecoderLayer, LlamaForCausalLM, LlamaModel


class Qwen3DecoderLayer(LlamaDecoderLayer):
    has_qk_norm = True


class Qwen3Model(LlamaModel):
    decoder_layer = Qwen3DecoderLayer


class Qwen3ForCausalLM(LlamaForCausalLM):
    model_class = Qwen3Model
