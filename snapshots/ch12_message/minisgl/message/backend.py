"""发给调度器的消息（tokenizer 进程 → 调度器 rank 0，再原样转发给其他 rank）。"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from minisgl.core import SamplingParams

from .utils import check_family, deserialize_type, serialize_type


@dataclass
class BaseBackendMsg:
    """这一族消息的基类：负责编码与解码，自己从不被发送。"""

    def encoder(self) -> dict:
        return serialize_type(self)

    @staticmethod
    def decoder(data: Any) -> BaseBackendMsg:
        msg = deserialize_type(_DECODABLE, data)
        check_family(msg, BaseBackendMsg, BatchBackendMsg, "调度器")
        return msg


@dataclass
class BatchBackendMsg(BaseBackendMsg):
    """把多条消息装进一帧发送，接收方拆开后逐条处理。"""

    data: list[BaseBackendMsg]


@dataclass
class ExitMsg(BaseBackendMsg):
    """让调度器退出主循环。"""


@dataclass
class UserMsg(BaseBackendMsg):
    """一个已经分好词的新请求。"""

    uid: int
    input_ids: torch.Tensor  # CPU 上的一维 int32 张量
    sampling_params: SamplingParams


@dataclass
class AbortBackendMsg(BaseBackendMsg):
    """取消请求 uid（客户端断开，或者命中了 stop 字符串）。"""

    uid: int


# 解码器只认这些类：收到的字节无法让它构造别的类型
_DECODABLE = {cls.__name__: cls for cls in (BatchBackendMsg, ExitMsg, UserMsg, AbortBackendMsg,
                                              SamplingParams)}
