"""发给 tokenizer 进程的消息：来自 API server（要分词、要取消）和调度器（新 token、拒绝）。"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from minisgl.core import SamplingParams

from .utils import check_family, deserialize_type, serialize_type


@dataclass
class BaseTokenizerMsg:
    """这一族消息的基类：负责编码与解码，自己从不被发送。"""

    def encoder(self) -> dict:
        return serialize_type(self)

    @staticmethod
    def decoder(data: Any) -> BaseTokenizerMsg:
        msg = deserialize_type(_DECODABLE, data)
        check_family(msg, BaseTokenizerMsg, BatchTokenizerMsg, "tokenizer ")
        return msg


@dataclass
class BatchTokenizerMsg(BaseTokenizerMsg):
    """把多条消息装进一帧发送，接收方拆开后逐条处理。"""

    data: list[BaseTokenizerMsg]


@dataclass
class TokenizeMsg(BaseTokenizerMsg):
    """API server 收到的新请求：纯文本，或者 chat 格式的消息列表。"""

    uid: int
    text: str | list[dict[str, str]]
    sampling_params: SamplingParams
    stop: list[str] = field(default_factory=list)  # OpenAI 的 stop；只在 tokenizer 进程里用
    skip_special_tokens: bool = False  # 反分词时去掉特殊 token（vLLM 的参数，API 默认 True）


@dataclass
class DetokenizeMsg(BaseTokenizerMsg):
    """调度器每步为每个请求报告一个新 token。"""

    uid: int
    next_token: int
    finished: bool
    # 请求要了 logprobs 时：这个 token 的 log 概率，和概率最大的几个 token（id 与 log 概率）
    logprob: float | None = None
    top_ids: list[int] = field(default_factory=list)
    top_logprobs: list[float] = field(default_factory=list)


@dataclass
class AbortMsg(BaseTokenizerMsg):
    """API server 放弃了请求 uid（客户端断开）。"""

    uid: int


@dataclass
class RejectMsg(BaseTokenizerMsg):
    """调度器拒绝了请求 uid（例如提示词太长），reason 是给用户看的中文原因。本书新增。"""

    uid: int
    reason: str


_DECODABLE = {cls.__name__: cls for cls in (BatchTokenizerMsg, TokenizeMsg, DetokenizeMsg,
                                              AbortMsg, RejectMsg, SamplingParams)}
