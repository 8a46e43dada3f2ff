"""模型注册表：config.json 里的 architectures[0] → 模型类。加一个新架构就在这里加一行。"""

from __future__ import annotations

from .base import BaseLLMModel
from .config import ModelConfig
from .llama import LlamaForCausalLM
from .qwen3 import Qwen3ForCausalLM

MODEL_REGISTRY: dict[str, type[BaseLLMModel]] = {
    "LlamaForCausalLM": LlamaForCausalLM,
    "Qwen3ForCausalLM": Qwen3ForCausalLM,
}


def create_model(config: ModelConfig) -> BaseLLMModel:
    """按架构名建模型。权重是 torch.empty 出来的：在 meta 设备上调用时不占内存。"""
    cls = MODEL_REGISTRY.get(config.architecture)
    if cls is None:
        raise ValueError(
            f"不支持的模型架构 {config.architecture!r}，目前支持：{'、'.join(MODEL_REGISTRY)}"
        )
    return cls(config)
