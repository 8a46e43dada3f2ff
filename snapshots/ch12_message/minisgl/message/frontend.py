"""发回 API server 的消息（tokenizer 进程 → API server）。"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .utils import check_family, deserialize_type, serialize_type


@dataclass
class BaseFrontendMsg:
    """这一族消息的基类：负责编码与解码，自己从不被发送。"""

    def encoder(self) -> dict:
        return serialize_type(self)

    @staticmethod
    def decoder(data: Any) -> BaseFrontendMsg:
        msg = deserialize_type(_DECODABLE, data)
        check_family(msg, BaseFrontendMsg, BatchFrontendMsg, "前端")
        return msg


@dataclass
class BatchFrontendMsg(BaseFrontendMsg):
    """把多条回复装进一帧发送，接收方拆开后逐条处理。"""

    data: list[BaseFrontendMsg]


@dataclass
class UserReply(BaseFrontendMsg):
    """请求 uid 新增的一段文本；finished 时带上结束原因与 token 用量。"""

    uid: int
    incremental_output: str
    finished: bool
    finish_reason: str | None = None  # "stop" | "length" | "abort" | "error"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None  # finish_reason == "error" 时给用户看的原因


_DECODABLE = {cls.__name__: cls for cls in (BatchFrontendMsg, UserReply)}
