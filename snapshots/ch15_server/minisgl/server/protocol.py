"""OpenAI 接口的请求格式（pydantic 模型）：字段、取值范围、mini-sglang 不支持的参数。"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from minisgl.core import MAX_TOP_LOGPROBS, SEED_RANGE

from .errors import BadRequest

INT_MAX = 2**31 - 1  # 整数参数的上限：再大 msgpack 编不了，也没有意义


class _Strict(BaseModel):
    # 不认识的字段报 400，而不是悄悄忽略：客户端以为生效了的参数其实没生效，更难查
    # strict：不把 "5" 当成 5，类型写错就报错
    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _null_means_absent(cls, data: Any) -> Any:
        # OpenAI 的可选参数都可以写 null，意思和不写一样
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data

    @field_validator("*", mode="after")
    @classmethod
    def _utf8_only(cls, value: Any) -> Any:
        # JSON 里的 "\ud800"（孤立的代理项）能解析成 Python 字符串，却编不成 UTF-8：在这里拦住
        for text in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
            if isinstance(text, str):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    raise ValueError("含有无法用 UTF-8 编码的字符（孤立的代理项，如 \\ud800）") from None
        return value


class TextPart(_Strict):
    type: Literal["text"]
    text: str


class ChatMessage(_Strict):
    role: Literal["system", "developer", "user", "assistant"]  # developer：新版 OpenAI 对 system 的叫法
    content: str | list[TextPart] = ""  # assistant 的 content 可以是 null（只调用了工具时）
    name: str | None = None  # OpenAI 的字段：只接受，不用

    def as_dict(self) -> dict[str, str]:
        text = self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)
        role = "system" if self.role == "developer" else self.role
        return {"role": role, "content": text}


class StreamOptions(_Strict):
    include_usage: bool = False  # true：[DONE] 之前多一个只带 usage 的块


# OpenAI 的标准参数里我们不实现的：只在取"什么都不做"的值时接受，否则 400 并点名
_NEUTRAL = {"echo": False, "best_of": 1, "logit_bias": {}}
MAX_N = 16  # 一个请求最多要几个回答（n）：每个回答是调度器里的一个请求


class CommonRequest(_Strict):
    model: str | None = None  # 只服务一个模型：不写可以，写了别的名字 404（和 vLLM 一样）
    max_tokens: int | None = Field(default=None, ge=1, le=INT_MAX)
    temperature: float = Field(default=1.0, ge=0, le=2)  # OpenAI 的默认值是 1
    top_p: float = Field(default=1.0, gt=0, le=1)
    top_k: int = Field(default=-1, le=INT_MAX)  # OpenAI 没有；和 SGLang 一样作为扩展（-1 不限制）
    stop: str | list[str] | None = None
    ignore_eos: bool = False  # 扩展：生成到 EOS 也不停（压测时让每个请求都正好 max_tokens）
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(default=1, ge=1, le=MAX_N)  # 几个回答：共用提示的前缀页，各自采样
    user: str | None = None  # OpenAI 的字段，只记录不用
    presence_penalty: float = Field(default=0, ge=-2, le=2)
    frequency_penalty: float = Field(default=0, ge=-2, le=2)
    echo: bool = False
    best_of: int = 1
    logit_bias: dict[str, float] = Field(default_factory=dict)
    seed: int | None = Field(default=None, ge=SEED_RANGE[0], lt=SEED_RANGE[1])
    # 不影响生成的字段：接受、不用（OpenAI 的存储、标签与服务等级）
    store: bool = False
    metadata: dict[str, str] | None = None
    service_tier: str | None = None
    skip_special_tokens: bool = True  # vLLM 的扩展：回答里不出现特殊 token（默认值同 vLLM）

    def check_supported(self) -> None:
        for name, neutral in _NEUTRAL.items():
            value = getattr(self, name)
            if value != neutral:
                raise BadRequest(f"参数 {name}：mini-sglang 不支持（只接受不写或 {neutral!r}，"
                                  f"收到 {value!r}）", name)
        if self.stream_options is not None and not self.stream:
            raise BadRequest("参数 stream_options 只能和 stream: true 一起用", "stream_options")

    def stop_list(self) -> list[str]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if any(s == "" for s in stops):
            raise BadRequest("stop 里不能有空字符串", "stop")
        return stops


class ChatCompletionRequest(CommonRequest):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=INT_MAX)  # 新版 OpenAI 的名字
    logprobs: bool = False  # chat：要不要 log 概率；候选个数另由 top_logprobs 给
    top_logprobs: int = Field(default=0, ge=0, le=MAX_TOP_LOGPROBS)

    def logprobs_wanted(self) -> tuple[bool, int]:
        if self.top_logprobs and not self.logprobs:
            raise BadRequest("参数 top_logprobs：要先把 logprobs 设为 true", "top_logprobs")
        return self.logprobs, self.top_logprobs


class CompletionRequest(CommonRequest):
    prompt: str | list[str]  # 列表只能有一个元素（一次一个续写）；token id 的列表不支持
    logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)  # 续写：候选的个数

    def logprobs_wanted(self) -> tuple[bool, int]:
        return self.logprobs is not None, self.logprobs or 0

    def prompt_text(self) -> str:
        if isinstance(self.prompt, str):
            return self.prompt
        if len(self.prompt) != 1:
            raise BadRequest(f"参数 prompt：一次只能续写一个提示，收到 {len(self.prompt)} 个", "prompt")
        return self.prompt[0]
