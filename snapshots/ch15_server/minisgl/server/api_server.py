"""API server：OpenAI 兼容的 HTTP 接口（FastAPI + uvicorn），跑在主进程的事件循环里。

它自己不碰模型也不分词：一个请求进来，编一个 uid，把文字和采样参数发给 tokenizer 进程
（TokenizeMsg），然后等 tokenizer 进程把一段段文字（UserReply）推回 "frontend" 地址。

    POST /v1/chat/completions   多轮对话（messages）；stream=true 时是 SSE 的 chat.completion.chunk
    POST /v1/completions        续写（prompt）；stream=true 时是 SSE 的 text_completion
    GET  /v1/models[/{id}]      服务的是哪个模型
    GET  /health                后端进程都活着时 200，否则 503

出错一律用 OpenAI 的格式：{"error": {"message", "type", "param", "code"}}。
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from starlette.exceptions import HTTPException as StarletteHTTPException

from minisgl.core import SamplingParams
from minisgl.message import (
    AbortMsg,
    BaseFrontendMsg,
    BaseTokenizerMsg,
    BatchFrontendMsg,
    TokenizeMsg,
    UserReply,
)
from minisgl.tokenizer.server import PROMPT_TOO_LONG
from minisgl.utils import init_logger

logger = init_logger(__name__)


# ---------------------------------------------------------------------------- 前端管理器


class BackendUnavailable(Exception):
    """后端（调度器或 tokenizer 进程）已经退出，请求不可能再有回复。"""


@dataclass(frozen=True)
class _BackendDown:
    """放进每个等待中请求的队列：叫醒它，告诉它后端没了（不然它会一直等）。"""

    reason: str


class FrontendManager:
    """API server 和 tokenizer 进程之间的那一层：编 uid、发请求、把回复按 uid 分给等待的协程。

    send：推给 tokenizer 进程的队列（ZmqAsyncPushQueue）；recv：从 "frontend" 地址收回复的队列
    （ZmqAsyncPullQueue，API server 绑定）。一个后台任务不停地收，按 uid 放进各自的 asyncio.Queue。
    """

    def __init__(self, send, recv) -> None:
        self.send, self.recv = send, recv
        self.uid_counter = 0
        self.reply_queues: dict[int, asyncio.Queue] = {}  # 还在等回复的请求
        self.backend_error: str | None = None  # 后端退出的原因；None 表示都活着
        self.accepting = True  # 停服务时置 False：不收新请求
        self._listener: asyncio.Task | None = None
        self._background: set[asyncio.Task] = set()  # 发出去的取消消息，留个引用免得被回收

    def start(self) -> None:
        self._listener = asyncio.get_running_loop().create_task(self._listen())

    async def _listen(self) -> None:
        try:
            while True:
                msg = await self.recv.get()
                for reply in _unwrap(msg):
                    queue = self.reply_queues.get(reply.uid)
                    if queue is not None:  # 找不到：客户端已经放弃了这个请求，回复直接丢掉
                        queue.put_nowait(reply)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # 收坏了就再也收不到任何回复：当成后端出错，让等待者立刻失败
            logger.exception("API server 收回复时出错")
            self.backend_died(f"API server 收回复时出错：{e!r}")

    async def submit(self, text: str | list[dict[str, str]], params: SamplingParams,
                     stop: list[str]) -> int:
        """发出一个请求，返回它的 uid。后端已经退出时立刻抛 BackendUnavailable。"""
        if self.backend_error is not None:
            raise BackendUnavailable(self.backend_error)
        if not self.accepting:
            raise BackendUnavailable("服务器正在停止")
        uid = self.uid_counter
        self.uid_counter += 1
        self.reply_queues[uid] = asyncio.Queue()  # 先建队列再发：回复不会比队列先到
        try:
            await self.send.put(TokenizeMsg(uid=uid, text=text, sampling_params=params, stop=stop))
        except BaseException:  # 没发出去（被取消、编码失败）：别留下一个永远没人取的队列
            self.reply_queues.pop(uid, None)
            raise
        return uid

    async def next_reply(self, uid: int) -> UserReply:
        """等 uid 的下一段回复。最后一段（finished=True）取走后，这个 uid 就不再登记。"""
        item = await self.reply_queues[uid].get()
        if isinstance(item, _BackendDown):
            self.reply_queues.pop(uid, None)
            raise BackendUnavailable(item.reason)
        if item.finished:
            del self.reply_queues[uid]
        return item

    def abort(self, uid: int) -> None:
        """客户端不要这个请求了：不再收它的回复，并让后端停下它、还回它的 KV 页。

        不用 await：它常在一个刚被取消的协程的 finally 里调用，那里再 await 会被再次取消。
        """
        if self.reply_queues.pop(uid, None) is None:
            return  # 已经正常结束，没什么可取消的
        logger.info("客户端断开，取消请求 %d", uid)
        if self.backend_error is None:
            task = asyncio.get_running_loop().create_task(self.send.put(AbortMsg(uid=uid)))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def drain(self, seconds: float) -> None:
        """服务器要停了：新请求立刻 503；正在生成的最多再等 seconds 秒，到时叫醒它们、让它们收尾。"""
        loop = asyncio.get_running_loop()
        loop.call_later(seconds, self._fail_all, f"服务器正在停止（已等了 {seconds} 秒）")
        self.accepting = False
        if self.reply_queues:
            logger.info("服务器正在停止：%d 个请求还在生成，最多再等 %s 秒", len(self.reply_queues), seconds)

    def backend_died(self, reason: str) -> None:
        """某个后端进程退出了（由启动器的看守线程经事件循环调用）：叫醒所有等待者。"""
        if self.backend_error is None:
            logger.error("%s；之后的请求都会立刻得到 503", reason)
        self._fail_all(reason)

    def _fail_all(self, reason: str) -> None:
        if self.backend_error is not None:
            return
        self.backend_error = reason
        for queue in self.reply_queues.values():
            queue.put_nowait(_BackendDown(reason))

    async def shutdown(self) -> None:
        if self._background:  # 还没发完的取消消息先发完，再关套接字
            await asyncio.wait(list(self._background), timeout=1.0)
        if self._listener is not None:
            self._listener.cancel()
        self.send.stop()
        self.recv.stop()


def _unwrap(msg: BaseFrontendMsg) -> list[UserReply]:
    if isinstance(msg, BatchFrontendMsg):
        return [m for inner in msg.data for m in _unwrap(inner)]
    assert isinstance(msg, UserReply), f"API server 只应收到 UserReply，收到 {type(msg).__name__}"
    return [msg]


def connect_frontend(frontend_addr: str, tokenizer_addr: str) -> FrontendManager:
    """建 ZMQ 队列：绑定自己的 "frontend"（PULL），连到 tokenizer 进程的地址（PUSH）。要在事件循环里调用。"""
    from minisgl.utils.mp import ZmqAsyncPullQueue, ZmqAsyncPushQueue

    recv = ZmqAsyncPullQueue(frontend_addr, create=True, decoder=BaseFrontendMsg.decoder)
    send = ZmqAsyncPushQueue(tokenizer_addr, create=False, encoder=BaseTokenizerMsg.encoder)
    return FrontendManager(send, recv)


# ---------------------------------------------------------------------------- 请求的格式


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
_NEUTRAL = {"presence_penalty": 0, "frequency_penalty": 0, "logprobs": False, "echo": False,
            "best_of": 1, "top_logprobs": 0, "logit_bias": {}, "seed": None}


class _CommonRequest(_Strict):
    model: str | None = None  # 只服务一个模型：写什么都行
    max_tokens: int | None = Field(default=None, ge=1, le=INT_MAX)
    temperature: float = Field(default=1.0, ge=0, le=2)  # OpenAI 的默认值是 1
    top_p: float = Field(default=1.0, gt=0, le=1)
    top_k: int = Field(default=-1, le=INT_MAX)  # OpenAI 没有；和 SGLang 一样作为扩展（-1 不限制）
    stop: str | list[str] | None = None
    ignore_eos: bool = False  # 扩展：生成到 EOS 也不停（压测时让每个请求都正好 max_tokens）
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: Literal[1] = 1  # 只支持每个请求一个回答
    user: str | None = None  # OpenAI 的字段，只记录不用
    presence_penalty: float = 0
    frequency_penalty: float = 0
    logprobs: bool | int = False  # chat 里是 bool，续写里是 int
    echo: bool = False
    best_of: int = 1
    top_logprobs: int = 0
    logit_bias: dict[str, float] = Field(default_factory=dict)
    seed: int | None = None

    def check_supported(self) -> None:
        for name, neutral in _NEUTRAL.items():
            value = getattr(self, name)
            if value != neutral and not (name == "logprobs" and value in (0, False)):
                raise _BadRequest(f"参数 {name}：mini-sglang 不支持（只接受不写或 {neutral!r}，"
                                  f"收到 {value!r}）", name)
        if self.stream_options is not None and not self.stream:
            raise _BadRequest("参数 stream_options 只能和 stream: true 一起用", "stream_options")

    def stop_list(self) -> list[str]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if any(s == "" for s in stops):
            raise _BadRequest("stop 里不能有空字符串", "stop")
        return stops


class ChatCompletionRequest(_CommonRequest):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=INT_MAX)  # 新版 OpenAI 的名字


class CompletionRequest(_CommonRequest):
    prompt: str | list[str]  # 列表只能有一个元素（一次一个续写）；token id 的列表不支持

    def prompt_text(self) -> str:
        if isinstance(self.prompt, str):
            return self.prompt
        if len(self.prompt) != 1:
            raise _BadRequest(f"参数 prompt：一次只能续写一个提示，收到 {len(self.prompt)} 个", "prompt")
        return self.prompt[0]


# ---------------------------------------------------------------------------- 错误：OpenAI 的格式


class _BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def error_response(status: int, message: str, param: str | None = None,
                   kind: str | None = None, code: str | None = None) -> JSONResponse:
    kind = kind or ("invalid_request_error" if status < 500 else "server_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status)


_PYDANTIC_ZH = {  # pydantic 的错误类型 → 中文说明（没列出的用 pydantic 的英文原话）
    "missing": "缺少这个字段",
    "extra_forbidden": "不认识这个字段（服务器不支持它）",
    "int_type": "要一个整数", "float_type": "要一个数", "bool_type": "要 true 或 false",
    "string_type": "要一个字符串", "list_type": "要一个列表",
    "model_type": "要一个 JSON 对象", "model_attributes_type": "要一个 JSON 对象",
    "json_invalid": "请求体不是合法的 JSON", "too_short": "不能为空",
}


def _describe_validation_error(err: dict[str, Any], content_type: str) -> tuple[str, str | None]:
    loc = [str(x) for x in err.get("loc", ()) if x != "body"]
    # 联合类型（如 stop: str | list[str]）的报错在路径里带着候选类型名，去掉
    path = ".".join(x for x in loc if not any(c in x for c in "[]|") and x not in ("str", "list"))
    kind, ctx = err.get("type", ""), err.get("ctx") or {}
    if not path and "json" not in content_type:
        return f"请求体要是 JSON，Content-Type 要写 application/json（收到 {content_type!r}）", None
    if not path and kind == "missing":
        return "请求体是空的：要一个 JSON 对象", None
    if len(loc) >= 3 and loc[0] == "messages" and "content" in loc and kind != "value_error":
        return (f"参数 {'.'.join(loc[:3])}：要一个字符串，或 type 为 \"text\" 的片段列表"
                "（不支持图片等其他类型）", ".".join(loc[:3]))
    if kind in _PYDANTIC_ZH:
        text = _PYDANTIC_ZH[kind]
    elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        op = {"greater_than_equal": "≥", "greater_than": ">", "less_than_equal": "≤",
              "less_than": "<"}[kind]
        bound = next(iter(ctx.values()), "?")
        text = f"要 {op} {bound}"
    elif kind == "literal_error":
        text = f"只能取 {ctx.get('expected')}"
    elif kind == "value_error":  # 我们自己的检查（如 UTF-8）：消息就是中文
        text = str(ctx.get("error", err.get("msg", kind)))
    else:
        text = err.get("msg", kind)
    if kind == "json_invalid":
        return f"{text}：{ctx.get('error', '')}", None
    if not path:
        return f"请求体{text}", None
    return f"参数 {path}：{text}", path


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        content_type = request.headers.get("content-type", "")
        message, param = _describe_validation_error(exc.errors()[0], content_type)
        return error_response(400, message, param)  # OpenAI 对参数错误用 400（FastAPI 默认 422）

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        messages = {404: f"没有这个接口：{request.method} {request.url.path}",
                    405: f"{request.url.path} 不支持 {request.method}"}
        return error_response(exc.status_code, messages.get(exc.status_code, str(exc.detail)),
                              kind="not_found_error" if exc.status_code == 404 else None)

    @app.exception_handler(_BadRequest)
    async def _bad(_: Request, exc: _BadRequest) -> JSONResponse:
        return error_response(400, str(exc), exc.param)

    @app.exception_handler(BackendUnavailable)
    async def _down(_: Request, exc: BackendUnavailable) -> JSONResponse:
        return error_response(503, f"后端已退出，服务器不能再生成：{exc}")

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        logger.exception("处理请求时出错")
        return error_response(500, f"服务器内部错误：{exc!r}")


# ---------------------------------------------------------------------------- 应用


@dataclass(frozen=True)
class ServedModel:
    """/v1/models 里的那一个模型，以及没给 max_tokens 时用多少。"""

    name: str
    path: str
    max_seq_len: int  # 提示 + 生成最多多少个 token（调度器就绪时报上来的）

    @property
    def default_max_tokens(self) -> int:
        """chat 不给 max_tokens：能生成多少就生成多少（tokenizer 进程截到 max_seq_len − 提示长度）。"""
        return self.max_seq_len


MAX_BODY_BYTES = 4 * 2**20  # 请求体最多 4 MiB：再大的提示反正放不进 max_seq_len


class BodySizeLimit:
    """ASGI 中间件：请求体超过 limit 字节就回 413，不去读完、更不去解析它。

    先看 Content-Length；没有这个头（分块传输）就边收边数。
    """

    def __init__(self, app, limit: int = MAX_BODY_BYTES) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            return await self._reject(send)
        seen, started = 0, False

        async def counting_receive():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _BodyTooLarge
            return message

        async def tracking_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _BodyTooLarge:
            if not started:
                await self._reject(send)

    async def _reject(self, send) -> None:
        response = error_response(413, f"请求体超过 {self.limit // 2**20} MiB")
        await response({"type": "http"}, None, send)


class _BodyTooLarge(Exception):
    pass



def sse(data: dict | str) -> bytes:
    """一个 server-sent event：`data: <JSON>` 加一个空行。"""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


def create_app(model: ServedModel, connect: Callable[[], FrontendManager],
               on_ready: Callable[[FrontendManager], None] | None = None) -> FastAPI:
    """connect() 在事件循环启动后建 FrontendManager；on_ready(frontend) 让启动器开始看守子进程。"""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        frontend = connect()
        frontend.start()
        app.state.frontend = frontend
        if on_ready is not None:
            on_ready(frontend)
        yield
        await frontend.shutdown()

    app = FastAPI(title="mini-sglang", lifespan=lifespan)
    _install_error_handlers(app)
    app.add_middleware(BodySizeLimit)
    card = {"id": model.name, "object": "model", "created": 0, "owned_by": "minisgl",
            "root": model.path, "max_model_len": model.max_seq_len}

    @app.get("/v1/models")
    async def list_models() -> dict:
        return {"object": "list", "data": [card]}

    @app.get("/v1/models/{model_id:path}")
    async def retrieve_model(model_id: str):
        if model_id != model.name:
            return error_response(404, f"没有模型 {model_id!r}，这里只有 {model.name!r}", "model",
                                  kind="not_found_error", code="model_not_found")
        return card

    @app.get("/health")
    async def health(request: Request):
        error = request.app.state.frontend.backend_error
        if error is not None:
            return error_response(503, f"后端已退出：{error}")
        return {"status": "ok"}

    @app.post("/v1/chat/completions")
    async def chat_completions(req: ChatCompletionRequest, request: Request):
        text = [m.as_dict() for m in req.messages]
        max_tokens = req.max_completion_tokens or req.max_tokens or model.default_max_tokens
        return await _generate(request, req, text, max_tokens, _ChatFormat(model.name), "messages")

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest, request: Request):
        max_tokens = req.max_tokens or 16  # OpenAI 续写接口的默认值
        return await _generate(request, req, req.prompt_text(), max_tokens,
                               _TextFormat(model.name), "prompt")

    return app


async def _generate(request: Request, req: _CommonRequest, text, max_tokens: int, fmt,
                    prompt_param: str):
    frontend: FrontendManager = request.app.state.frontend
    req.check_supported()
    try:
        params = SamplingParams(temperature=req.temperature, top_k=req.top_k, top_p=req.top_p,
                                ignore_eos=req.ignore_eos, max_tokens=max_tokens)
    except ValueError as e:  # SamplingParams 自己的中文检查（如 top_k=0）
        raise _BadRequest(str(e), _bad_field(str(e))) from None
    uid = await frontend.submit(text, params, req.stop_list())
    fmt.id = f"{fmt.prefix}-{uuid.uuid4().hex}"  # 随机：重启后的编号不会和以前的撞上
    try:
        # 流式也先等第一段回复再发响应头：调度器拒收（提示太长……）时还能回一个 400
        first = await _next_or_disconnect(frontend, uid, request)
    except BaseException:
        frontend.abort(uid)
        raise
    if first is None:  # 客户端已经走了
        frontend.abort(uid)
        return error_response(499, "客户端已断开")
    if first.finished and first.finish_reason == "error":
        error = first.error or "请求被调度器拒绝"
        if error.startswith(PROMPT_TOO_LONG):
            return error_response(400, error, prompt_param, code="context_length_exceeded")
        return error_response(400, error)
    if req.stream:
        include_usage = req.stream_options is not None and req.stream_options.include_usage
        fmt.include_usage = include_usage
        return StreamingResponse(_stream(frontend, uid, first, fmt, include_usage),
                                 media_type="text/event-stream")
    return await _collect(frontend, uid, first, fmt, request)


async def _next_or_disconnect(frontend: FrontendManager, uid: int,
                              request: Request) -> UserReply | None:
    """等下一段回复；每秒看一次客户端还在不在，不在了返回 None（非流式请求靠它发现断开）。"""
    while True:
        try:
            return await asyncio.wait_for(frontend.next_reply(uid), timeout=1.0)
        except asyncio.TimeoutError:
            if await request.is_disconnected():
                return None


async def _collect(frontend: FrontendManager, uid: int, first: UserReply, fmt, request: Request):
    """非流式：收齐所有回复，拼成一个完整的对象。"""
    pieces, reply = [first.incremental_output], first
    try:
        while not reply.finished:
            reply = await _next_or_disconnect(frontend, uid, request)
            if reply is None:
                frontend.abort(uid)
                return error_response(499, "客户端已断开")
            pieces.append(reply.incremental_output)
    except BaseException:
        frontend.abort(uid)
        raise
    if reply.finish_reason == "error":
        return error_response(500, reply.error or "生成时出错")
    return fmt.full("".join(pieces), reply.finish_reason, _usage(reply))


async def _stream(frontend: FrontendManager, uid: int, first: UserReply, fmt,
                  include_usage: bool) -> AsyncIterator[bytes]:
    """流式：每段回复一个 SSE 块；最后一块带 finish_reason，然后（可选）usage，最后 [DONE]。

    客户端断开时 Starlette 取消这个生成器：finally 里发现没正常结束，就取消这个请求。
    """
    done = False
    try:
        if (opening := fmt.opening()) is not None:
            yield sse(opening)
        reply = first
        while True:
            if reply.incremental_output:
                yield sse(fmt.chunk(text=reply.incremental_output))
            if reply.finished:
                break
            reply = await frontend.next_reply(uid)
        done = True
        if reply.finish_reason == "error":
            yield sse({"error": {"message": reply.error or "生成时出错", "type": "server_error",
                                 "param": None, "code": None}})
        else:
            yield sse(fmt.chunk(finish_reason=reply.finish_reason))
            if include_usage:
                yield sse(fmt.usage_chunk(_usage(reply)))
        yield sse("[DONE]")
    except BackendUnavailable as e:
        done = True
        yield sse({"error": {"message": f"后端已退出：{e}", "type": "server_error",
                             "param": None, "code": None}})
    finally:
        if not done:
            frontend.abort(uid)


def _bad_field(message: str) -> str | None:
    """SamplingParams 的报错以字段名开头（"top_k 必须是…"）：取出来当 OpenAI 的 param。"""
    name = message.split(" ", 1)[0]
    return name if name in ("temperature", "top_k", "top_p", "max_tokens", "ignore_eos") else None


def _usage(reply: UserReply) -> dict[str, int]:
    return {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens}


class _ChatFormat:
    """chat.completion / chat.completion.chunk 的样子。"""

    prefix = "chatcmpl"

    def __init__(self, model: str) -> None:
        self.model, self.id, self.created = model, "", int(time.time())
        self.include_usage = False  # 流式且要 usage：之前的每一块都带 "usage": null（OpenAI 的做法）

    def _head(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}

    def _chunk_head(self, obj: str) -> dict:
        return {**self._head(obj), "usage": None} if self.include_usage else self._head(obj)

    def full(self, text: str, finish_reason: str | None, usage: dict) -> dict:
        choice = {"index": 0, "message": {"role": "assistant", "content": text},
                  "logprobs": None, "finish_reason": finish_reason}
        return {**self._head("chat.completion"), "choices": [choice], "usage": usage}

    def opening(self) -> dict | None:
        """流式的第一块：只说"下面是 assistant 在说话"，还没有文字。"""
        choice = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                  "finish_reason": None}
        return {**self._chunk_head("chat.completion.chunk"), "choices": [choice]}

    def chunk(self, *, text: str | None = None, finish_reason: str | None = None) -> dict:
        delta = {} if text is None else {"content": text}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**self._chunk_head("chat.completion.chunk"), "choices": [choice]}

    def usage_chunk(self, usage: dict) -> dict:
        return {**self._head("chat.completion.chunk"), "choices": [], "usage": usage}


class _TextFormat(_ChatFormat):
    """text_completion 的样子：流式和非流式是同一种对象，文字在 choices[0].text。"""

    prefix = "cmpl"

    def full(self, text: str, finish_reason: str | None, usage: dict) -> dict:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        return {**self._head("text_completion"), "choices": [choice], "usage": usage}

    def opening(self) -> None:
        return None  # 续写没有角色，第一块就是文字

    def chunk(self, *, text: str | None = None, finish_reason: str | None = None) -> dict:
        choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish_reason}
        return {**self._chunk_head("text_completion"), "choices": [choice]}

    def usage_chunk(self, usage: dict) -> dict:
        return {**self._head("text_completion"), "choices": [], "usage": usage}


def run_api_server(model: ServedModel, connect: Callable[[], FrontendManager], host: str,
                   port: int, on_ready: Callable[[FrontendManager], None] | None = None) -> int | None:
    """在当前进程里跑 uvicorn，直到 Ctrl-C / SIGTERM。

    第一次 Ctrl-C / SIGTERM：不收新请求，正在生成的请求（每个都是一个打开的 HTTP 连接）最多
    再等 GRACEFUL_SECONDS 秒，到时 FrontendManager 叫醒它们：流式的收到一个 error 事件，非流式的
    得到 503，各自正常结束。第二次 Ctrl-C：不再等，立刻这样收尾。uvicorn 自己的做法是等到所有连接
    关闭（不设上限），第二次 Ctrl-C 时直接取消任务、打出一堆 CancelledError 回溯；而且它停下后会把
    信号重发给原来的处理函数——启动器在 finally 里自己收尾，不需要这一次重发。
    返回让它停下的信号（启动器据此给出退出码 128 + 信号），没有信号时返回 None。
    """
    import uvicorn

    app = create_app(model, connect, on_ready)
    logger.info("API server 在 http://%s:%d 上服务（模型 %s）", host, port, model.name)
    class Server(uvicorn.Server):
        """和 uvicorn 的区别只在收到停止信号时做什么（见 run_api_server 的说明）。"""

        stop_signal: int | None = None

        def handle_exit(self, sig, frame) -> None:
            self.stop_signal = self.stop_signal or sig
            frontend = getattr(app.state, "frontend", None)
            if frontend is None:  # 还没开始服务：照 uvicorn 的办法停
                return super().handle_exit(sig, frame)
            loop = asyncio.get_event_loop()
            if not self.should_exit:  # 第一次：不收新请求，正在生成的最多再等几秒
                self.should_exit = True
                loop.call_soon_threadsafe(frontend.drain, GRACEFUL_SECONDS)
            else:  # 第二次：不等了，让每个请求立刻收尾（流式的收到一个 error 事件）
                loop.call_soon_threadsafe(frontend.backend_died, "服务器被强制停止")

    # timeout_graceful_shutdown 只是后备：drain 到时已经让每个请求自己收尾了
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=GRACEFUL_SECONDS + 5)
    server = Server(config)
    server.run()
    logger.info("API server 已停止")
    return server.stop_signal


GRACEFUL_SECONDS = 5  # 停服务时最多等正在生成的请求几秒
