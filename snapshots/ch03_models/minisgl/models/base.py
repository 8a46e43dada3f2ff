"""所有模型的共同接口。"""

from __future__ import annotations

from abc import abstractmethod

import torch

from minisgl.layers import BaseOP


class BaseLLMModel(BaseOP):
    @abstractmethod
    def forward(self) -> torch.Tensor:
        """一步前向。不带参数：这一批的 input_ids、positions 都从 get_global_ctx().batch 读。

        返回 logits，形状 [请求数, 词表大小]，float32：prefill 时每个请求只取最后一个 token。
        """
