"""发回 API server 的消息（tokenizer 进程 → API server）。"""

from __future__ import annotations

from dataclasses import dataclass, field
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
class TokenLogprob:
    """一个 token 的 log 概率，字段照 OpenAI chat 的 logprobs.content[]。不是消息，只出现在字段里。"""

    token: str  # 这个 token 单独解码出的文字（半个字时是 U+FFFD）
    logprob: float
    bytes: list[int]  # token 文字的 UTF-8 字节
    top_logprobs: list[TokenLogprob] = field(default_factory=list)  # 候选本身不再带候选


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
    error_code: str | None = None  # 出错的种类（如 "context_length_exceeded"），在抛出错误的地方定下；None：一般的错误
    logprobs: list[TokenLogprob] = field(default_factory=list)  # 这段文字对应的 token（要了才有）


_DECODABLE = {cls.__name__: cls for cls in (BatchFrontendMsg, UserReply, TokenLogprob)}
