"""注意力后端的接口。

模型里的注意力层（layers/attention.py 的 AttentionLayer）只做"每个 token 自己能完成"的事：切 q/k/v、
归一化、RoPE。真正的 softmax(QKᵀ/√d)·V 交给注意力后端，因为它要：

- 把这一步新算出的 K/V 写进 KV 池（槽位是 batch.out_loc）；
- 按页表取回每个请求全部的 K/V（缓存的前缀 + 这一步的），各请求长度不同；
- 知道每个 query 能看见哪些 key（因果掩码）。

这些信息对一个批次的所有层都一样，所以分两步：前向之前调用一次 prepare_metadata(batch)，
把算好的东西放进 batch.attn_metadata；每一层的 forward 直接用。别的后端实现同一个接口，
模型代码一行都不用改。
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from minisgl.core import Batch


@dataclass
class BaseAttnMetadata:
    """一个批次的注意力元数据。每个后端继承它，加上自己需要的字段。"""


class BaseAttnBackend(ABC):
    @abstractmethod
    def prepare_metadata(self, batch: Batch) -> None:
        """前向之前调用一次：算好这一批所有层共用的东西，写进 batch.attn_metadata。"""

    @abstractmethod
    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer_id: int, batch: Batch
    ) -> torch.Tensor:
        """q: [T, hq, d]，k/v: [T, hkv, d]。T 是这一步全部请求的 token 数，按 padded_reqs 顺序拼接。

        先把 k/v 存进第 layer_id 层的 KV 池，再做注意力；返回 [T, hq, d]，顺序与 q 相同。
        """

    # ---- 图捕获（第 18 章）：decode 要走录好的图，后端得把元数据放进固定的缓冲区 ----

    def init_capture_graph(self, max_bs: int, max_seq_len: int) -> None:
        """按最大的批大小分配元数据缓冲区；录制和每次重放都只用它们。"""
        raise NotImplementedError(f"注意力后端 {type(self).__name__} 不支持图捕获（CUDA 图 / torch.compile）")

    def prepare_for_capture(self, batch: Batch) -> None:
        """录制前：batch.attn_metadata 设成缓冲区前 batch.padded_size 项的视图（内容是占位请求的）。"""
        raise NotImplementedError(f"注意力后端 {type(self).__name__} 不支持图捕获（CUDA 图 / torch.compile）")

    def prepare_for_replay(self, static: Batch, batch: Batch) -> None:
        """重放前：把 batch 已经准备好的元数据原地拷进 static（录制时的那个批）的缓冲区。"""
        raise NotImplementedError(f"注意力后端 {type(self).__name__} 不支持图捕获（CUDA 图 / torch.compile）")


class HybridBackend(BaseAttnBackend):
    """prefill 用一个后端，decode 用另一个：各自擅长的不一样。

    prefill 每个请求有很多 query，是算力活，参考后端交给 SDPA 的分块实现最快；decode 每个请求一个
    query，是搬运活，要紧的是少读少拷 KV。一批要么全是 prefill、要么全是 decode，按批选一个。
    """

    def __init__(self, prefill_backend: BaseAttnBackend, decode_backend: BaseAttnBackend) -> None:
        self.prefill_backend = prefill_backend
        self.decode_backend = decode_backend

    def _pick(self, batch: Batch) -> BaseAttnBackend:
        return self.prefill_backend if batch.is_prefill else self.decode_backend

    def prepare_metadata(self, batch: Batch) -> None:
        self._pick(batch).prepare_metadata(batch)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer_id: int, batch: Batch
    ) -> torch.Tensor:
        return self._pick(batch).forward(q, k, v, layer_id, batch)

    # 只有 decode 走图：捕获的钩子都交给 decode 的后端
    def init_capture_graph(self, max_bs: int, max_seq_len: int) -> None:
        self.decode_backend.init_capture_graph(max_bs, max_seq_len)

    def prepare_for_capture(self, batch: Batch) -> None:
        self.decode_backend.prepare_for_capture(batch)

    def prepare_for_replay(self, static: Batch, batch: Batch) -> None:
        self.decode_backend.prepare_for_replay(static, batch)
