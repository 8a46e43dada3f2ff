"""模型：配置、注册表、Llama / Qwen3，以及流式权重加载。"""

from .base import BaseLLMModel
from .config import ModelConfig
from .register import MODEL_REGISTRY, create_model
from .weight import load_weight, shard_tensor

__all__ = ["BaseLLMModel", "MODEL_REGISTRY", "ModelConfig", "create_model", "load_weight", "shard_tensor"]
