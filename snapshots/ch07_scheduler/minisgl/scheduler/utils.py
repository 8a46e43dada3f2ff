"""调度器内部传递的两种小记录：排队中的请求，和一步之后每个请求的结果。"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from minisgl.core import SamplingParams
from minisgl.engine import TokenLogprobs


@dataclass
class PendingReq:
    """还在排队、没有占页表行和 KV 页的请求。被接纳时才变成 Req。"""

    uid: int
    input_ids: torch.Tensor  # CPU 上的 int32 一维张量
    sampling_params: SamplingParams

    @property
    def input_len(self) -> int:
        return len(self.input_ids)

    @property
    def output_len(self) -> int:
        return self.sampling_params.max_tokens


class ReqOutput(NamedTuple):
    """一步之后一个请求的结果：新 token，以及这个请求是否就此结束。"""

    uid: int
    next_token: int
    finished: bool
    logprobs: TokenLogprobs | None = None  # 请求要了 logprobs 时：这个 token 的 log 概率
