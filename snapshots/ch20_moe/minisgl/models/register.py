"""模型注册表：config.json 里的 architectures[0] → 模型类。加一个新架构就在这里登记一行。"""

from __future__ import annotations

from minisgl.utils import Registry

from .base import BaseLLMModel
from .config import ModelConfig
from .llama import LlamaForCausalLM
from .qwen3 import Qwen3ForCausalLM
from .qwen3_moe import Qwen3MoeForCausalLM

MODEL_REGISTRY = Registry[type[BaseLLMModel]]("模型架构")
MODEL_REGISTRY.register("LlamaForCausalLM")(LlamaForCausalLM)
MODEL_REGISTRY.register("Qwen3ForCausalLM")(Qwen3ForCausalLM)
MODEL_REGISTRY.register("Qwen3MoeForCausalLM")(Qwen3MoeForCausalLM)


def create_model(config: ModelConfig) -> BaseLLMModel:
    """按架构名建模型。权重是 torch.empty 出来的：在 meta 设备上调用时不占内存。"""
    return MODEL_REGISTRY[config.architecture](config)
