"""EngineConfig：建一个 Engine 需要知道的全部设置。"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import torch

from minisgl.distributed import DistributedInfo
from minisgl.models import ModelConfig


@dataclass(frozen=True)
class EngineConfig:
    model_path: str | Path  # Hugging Face 格式的模型目录：config.json + *.safetensors
    tp_info: DistributedInfo = field(default_factory=lambda: DistributedInfo(0, 1))
    dtype: torch.dtype = torch.float32  # CPU 上默认 float32，和 HF 的参照逐 token 对得上
    device: str | None = None  # None：有 CUDA 用 cuda:rank，否则 CPU
    max_running_req: int = 16  # 同时在跑的请求数上限 = 页表的行数（再加一行占位行）
    page_size: int = 1  # 每页多少个 token
    attention_backend: str = "torch"
    memory_ratio: float = 0.3  # 加载完权重后，把剩余内存的这一比例给 KV 池
    num_page_override: int | None = None  # 直接指定 KV 池的页数（测试、演示时用）
    max_seq_len_override: int | None = None  # 单个请求最长几个 token；默认取模型的上限
    seed: int = 0  # 采样器的随机种子：同样的种子、同样的输入，采样结果可复现
    distributed_port: int = 29500  # TP>1 时 rank 之间建立连接用的端口（第 16 章）

    def __post_init__(self) -> None:
        if not 0 < self.memory_ratio <= 1:
            raise ValueError(f"memory_ratio 必须在 (0, 1] 之间，收到 {self.memory_ratio}")
        if self.max_running_req < 1:
            raise ValueError(f"max_running_req 必须 ≥ 1，收到 {self.max_running_req}")
        if self.page_size < 1:
            raise ValueError(f"page_size 必须 ≥ 1，收到 {self.page_size}")
        for name in ("num_page_override", "max_seq_len_override"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} 必须 ≥ 1，收到 {value}")

    @functools.cached_property
    def model_config(self) -> ModelConfig:
        return ModelConfig.from_json(self.model_path)

    @property
    def max_seq_len(self) -> int:
        if self.max_seq_len_override is not None:
            return self.max_seq_len_override
        return self.model_config.max_position_embeddings
