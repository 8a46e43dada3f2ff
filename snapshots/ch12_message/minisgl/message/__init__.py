"""进程之间传递的消息，按收件方分三族，每族有自己的编码器与解码器。

- backend：发给调度器（UserMsg、AbortBackendMsg、ExitMsg）；
- tokenizer：发给 tokenizer 进程（TokenizeMsg、AbortMsg、DetokenizeMsg、RejectMsg）；
- frontend：发回 API server（UserReply）。
"""

from .backend import AbortBackendMsg, BaseBackendMsg, BatchBackendMsg, ExitMsg, UserMsg
from .frontend import BaseFrontendMsg, BatchFrontendMsg, TokenLogprob, UserReply
from .tokenizer import (
    AbortMsg,
    BaseTokenizerMsg,
    BatchTokenizerMsg,
    DetokenizeMsg,
    RejectMsg,
    TokenizeMsg,
)
from .utils import deserialize_type, serialize_type

__all__ = [
    "BaseBackendMsg",
    "BatchBackendMsg",
    "ExitMsg",
    "UserMsg",
    "AbortBackendMsg",
    "BaseTokenizerMsg",
    "BatchTokenizerMsg",
    "TokenizeMsg",
    "DetokenizeMsg",
    "AbortMsg",
    "RejectMsg",
    "BaseFrontendMsg",
    "BatchFrontendMsg",
    "UserReply",
    "TokenLogprob",
    "serialize_type",
    "deserialize_type",
]
