"""线性层，一开始就写成张量并行（TP）的最终形态；单卡只是 tp_size = 1 的特例。

切一个 y = x @ W.T（W 形状 [out, in]）只有两种切法：

- 列并行：按输出维切 W 的行。每个 rank 算出 y 的一段，彼此无关，不用通信。
  q/k/v、gate/up 这样"后面还要逐头、逐元素处理"的投影都用它。
- 行并行：按输入维切 W 的列。每个 rank 只拿到 x 的一段，算出的是 y 的部分和，
  要 all_reduce 加起来才是完整的 y。o_proj、down_proj 用它，正好接在列并行后面：
  列并行的输出本来就是分段的，直接当行并行的输入，一个 MLP 只需一次通信。

每个 rank 建层时从 get_tp_info() 得知自己是谁，只分配本地那一份权重。
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from minisgl.distributed import DistributedCommunicator, get_tp_info, local_kv_heads
from minisgl.utils import div_even

from .base import BaseOP


class _LinearTPImpl(BaseOP):
    """所有线性层的共同部分：本地权重 [local_out, local_in]，可选的 bias。"""

    def __init__(self, local_in: int, local_out: int, has_bias: bool) -> None:
        self.weight = torch.empty(local_out, local_in)
        if has_bias:
            self.bias = torch.empty(local_out)
        self._matmul: Callable[[torch.Tensor], torch.Tensor] | None = None  # None：F.linear

    def matmul_weight(self) -> torch.Tensor:
        return self.weight

    def use_matmul(self, matmul: Callable[[torch.Tensor], torch.Tensor], *, drop_weight: bool) -> None:
        """换掉 x @ W.T 的算法（见 quant.py）。量化过的不再需要 float32 权重：drop_weight 删掉它，省内存。"""
        self._matmul = matmul
        if drop_weight:
            del self.weight

    def _mm(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight) if self._matmul is None else self._matmul(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self._mm(x)
        bias = getattr(self, "bias", None)
        return y if bias is None else y + bias


class LinearReplicated(_LinearTPImpl):
    """不切：每个 rank 都存完整的权重（例如 MoE 的路由层）。"""

    def __init__(self, in_features: int, out_features: int, has_bias: bool = False) -> None:
        super().__init__(in_features, out_features, has_bias)


class LinearColParallelMerged(_LinearTPImpl):
    """列并行，且把几个输入相同的投影合成一次矩阵乘（gate_proj 和 up_proj）。

    每个投影各自按 rank 切，再把本地的几段拼起来：本地权重是 [gate 的第 r 段; up 的第 r 段]，
    所以本地输出的前一半是 gate、后一半是 up，silu_and_mul 可以直接用。
    """

    def __init__(self, in_features: int, out_features: list[int], has_bias: bool = False) -> None:
        tp = get_tp_info()
        self.local_out_features = [div_even(n, tp.size) for n in out_features]
        super().__init__(in_features, sum(self.local_out_features), has_bias)


class LinearQKVMerged(_LinearTPImpl):
    """注意力的 q、k、v 三个投影合成一个列并行层，按"头"切。

    query 头平均分给各 rank；KV 头比 rank 少时（GQA，例如 8 个 KV 头、16 个 rank），
    每个 rank 放 1 个 KV 头，一个头复制到几个 rank 上——注意力按头独立计算，
    只要每个 rank 的 query 头配上它们共用的那个 KV 头，结果就不变。
    """

    def __init__(
        self, hidden_size: int, head_dim: int, num_qo_heads: int, num_kv_heads: int,
        has_bias: bool = False,
    ) -> None:
        tp = get_tp_info()
        self.head_dim = head_dim
        self.local_qo_heads = div_even(num_qo_heads, tp.size)
        self.local_kv_heads = local_kv_heads(num_kv_heads)
        local_out = (self.local_qo_heads + 2 * self.local_kv_heads) * head_dim
        super().__init__(hidden_size, local_out, has_bias)


class LinearRowParallel(_LinearTPImpl):
    """行并行：按输入维切，各 rank 的部分和经 all_reduce 相加。bias 只加一次（在求和之后）。"""

    def __init__(self, in_features: int, out_features: int, has_bias: bool = False) -> None:
        tp = get_tp_info()
        self.tp_size = tp.size
        super().__init__(div_even(in_features, tp.size), out_features, has_bias)
        self._comm = DistributedCommunicator()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self._mm(x)
        if self.tp_size > 1:
            y = self._comm.all_reduce(y)
        bias = getattr(self, "bias", None)
        return y if bias is None else y + bias


class LinearOProj(LinearRowParallel):
    """注意力的输出投影 o_proj：输入是各 rank 本地那几个头的输出拼接，所以也是行并行。"""
