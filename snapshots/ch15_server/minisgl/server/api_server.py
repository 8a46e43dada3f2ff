"""API server：OpenAI 兼容的 HTTP 接口（FastAPI + uvicorn），跑在主进程的事件循环里。

它自己不碰模型也不分词：一个请求进来，编一个 uid，把文字和采样参数发给 tokenizer 进程
（TokenizeMsg），然后等 tokenizer 进程把一段段文字（UserReply）推回 "frontend" 地址。

    POST /v1/chat/completions   多轮对话（messages）；stream=true 时是 SSE 的 chat.completion.chunk
    POST /v1/completions        续写（prompt）；stream=true 时是 SSE 的 text_completion
    GET  /v1/models[/{id}]      服务的是哪个模型
    GET  /health                后端答得上话时 200（发一个只生成 1 个 token 的探测请求），否则 503

前端管理器在 frontend.py，请求格式在 protocol.py，错误格式在 errors.py。
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import AsyncIterator, Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from minisgl.core import SEED_RANGE, SamplingParams
from minisgl.message import TokenLogprob, UserReply
from minisgl.utils import init_logger

from .errors import BadRequest, error_response, install_error_handlers, reply_error
from .frontend import BackendUnavailable, FrontendManager, ServedModel
from .protocol import ChatCompletionRequest, CommonRequest, CompletionRequest

logger = init_logger(__name__)

# ---------------------------------------------------------------------------- 应用


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
                raise _BodyTooLarge(self.limit)
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


class _BodyTooLarge(StarletteHTTPException):
    """边收边数时超了：FastAPI 读请求体时把别的异常都变成英文的 400，只有 HTTPException 原样抛出。"""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"请求体超过 {limit // 2**20} MiB")



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
    install_error_handlers(app)
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
        """进程活着还不够（被 SIGSTOP 的调度器也"活着"）：发一个只生成 1 个 token 的探测请求
        （和 SGLang 的做法一样），收到回复才算健康。后端卡住时由看守在 watchdog_timeout 秒后叫醒它。"""
        frontend: FrontendManager = request.app.state.frontend
        try:
            uid = await frontend.submit("ping", SamplingParams(max_tokens=1), [])
            try:
                await frontend.next_reply(uid)
            finally:
                frontend.abort(uid)  # 客户端不等了：别留下它的队列（正常结束时什么都不做）
        except BackendUnavailable as e:
            return error_response(503, f"后端不可用：{e}")
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


async def _generate(request: Request, req: CommonRequest, text, max_tokens: int, fmt,
                    prompt_param: str):
    frontend: FrontendManager = request.app.state.frontend
    if req.model is not None and req.model != fmt.model:
        return error_response(404, f"没有模型 {req.model!r}，这里只有 {fmt.model!r}", "model",
                              kind="not_found_error", code="model_not_found")
    req.check_supported()
    params = _sampling_params(req, max_tokens)
    fmt.logprobs = params.logprobs
    if req.n > 1:
        return await _generate_n(request, req, text, params, fmt, prompt_param)
    uid = await frontend.submit(text, params, req.stop_list(), req.skip_special_tokens)
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
    if (error := reply_error(first, prompt_param)) is not None:
        return error
    if req.stream:
        _disconnect_watch(request).cancel()  # 之后由 StreamingResponse 自己发现断开
        include_usage = req.stream_options is not None and req.stream_options.include_usage
        fmt.include_usage = include_usage
        return StreamingResponse(_stream(frontend, uid, first, fmt, include_usage),
                                 media_type="text/event-stream")
    return await _collect(frontend, uid, first, fmt, request)


async def _next_or_disconnect(frontend: FrontendManager, uid: int,
                              request: Request) -> UserReply | None:
    """等下一段回复；客户端先断开了就返回 None（非流式请求靠它发现断开）。"""
    gone = _disconnect_watch(request)
    reply = asyncio.ensure_future(frontend.next_reply(uid))
    try:
        await asyncio.wait((reply, gone), return_when=asyncio.FIRST_COMPLETED)
        return reply.result() if reply.done() else None
    finally:
        reply.cancel()  # 没等到（断开了、被取消了）：别留下一个永远在等的任务


def _disconnect_watch(request: Request) -> asyncio.Task:
    """这个请求的后台任务（第一次调用时建）：客户端一断开，它就结束。

    请求体已经读完，再向 ASGI 要消息，要到的只会是 http.disconnect：连接一断 uvicorn 立刻给，
    响应发完时也给（任务随之结束）。它不看有没有回复：非流式请求的回复一段段地来，只是没发给
    客户端，只在"一阵子没有回复"时才去看连接，生成期间就永远发现不了断开。
    """
    task = getattr(request.state, "disconnect_watch", None)
    if task is None:
        async def wait() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass

        task = request.state.disconnect_watch = asyncio.get_running_loop().create_task(wait())
    return task


async def _collect(frontend: FrontendManager, uid: int, first: UserReply, fmt, request: Request):
    """非流式：收齐所有回复，拼成一个完整的对象。"""
    pieces, reply = [first.incremental_output], first
    logprobs = list(first.logprobs)
    try:
        while not reply.finished:
            reply = await _next_or_disconnect(frontend, uid, request)
            if reply is None:
                frontend.abort(uid)
                return error_response(499, "客户端已断开")
            pieces.append(reply.incremental_output)
            logprobs.extend(reply.logprobs)
    except BaseException:
        frontend.abort(uid)
        raise
    if reply.finish_reason == "error":
        return error_response(500, reply.error or "生成时出错")
    return fmt.full("".join(pieces), reply.finish_reason, _usage(reply), logprobs)


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
            if reply.incremental_output or reply.logprobs:
                yield sse(fmt.chunk(text=reply.incremental_output, logprobs=reply.logprobs))
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
    return name if name in ("temperature", "top_k", "top_p", "max_tokens", "ignore_eos", "seed",
                            "presence_penalty", "frequency_penalty", "top_logprobs") else None


def _usage(reply: UserReply) -> dict[str, int]:
    return {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens}


class _ChatFormat:
    """chat.completion / chat.completion.chunk 的样子。index 是第几个回答（n > 1 时）。"""

    prefix = "chatcmpl"

    def __init__(self, model: str) -> None:
        self.model, self.id, self.created = model, "", int(time.time())
        self.include_usage = False  # 流式且要 usage：之前的每一块都带 "usage": null（OpenAI 的做法）
        self.logprobs = False  # 请求要了 logprobs：每个 choice 带 logprobs 对象，否则是 null

    def _head(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}

    def _chunk_head(self, obj: str) -> dict:
        return {**self._head(obj), "usage": None} if self.include_usage else self._head(obj)

    def logprobs_of(self, entries: list[TokenLogprob], index: int = 0,
                    stream: bool = False) -> dict | None:
        """OpenAI chat 的 logprobs：{"content": [{token, logprob, bytes, top_logprobs}, ...]}。"""
        if not self.logprobs:
            return None
        return {"content": [_chat_entry(e) for e in entries], "refusal": None}

    def full(self, text: str, finish_reason: str | None, usage: dict,
             logprobs: list[TokenLogprob] = ()) -> dict:
        choice = {"index": 0, "message": {"role": "assistant", "content": text},
                  "logprobs": self.logprobs_of(list(logprobs)), "finish_reason": finish_reason}
        return {**self._head("chat.completion"), "choices": [choice], "usage": usage}

    def opening(self, index: int = 0) -> dict | None:
        """流式的第一块：只说"下面是 assistant 在说话"，还没有文字。"""
        choice = {"index": index, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                  "finish_reason": None}
        return {**self._chunk_head("chat.completion.chunk"), "choices": [choice]}

    def chunk(self, *, text: str | None = None, finish_reason: str | None = None,
              logprobs: list[TokenLogprob] = (), index: int = 0) -> dict:
        delta = {} if text is None else {"content": text}
        lp = self.logprobs_of(list(logprobs), index, stream=True) if logprobs else None
        choice = {"index": index, "delta": delta, "logprobs": lp, "finish_reason": finish_reason}
        return {**self._chunk_head("chat.completion.chunk"), "choices": [choice]}

    def usage_chunk(self, usage: dict) -> dict:
        return {**self._head("chat.completion.chunk"), "choices": [], "usage": usage}


class _TextFormat(_ChatFormat):
    """text_completion 的样子：流式和非流式是同一种对象，文字在 choices[0].text。"""

    prefix = "cmpl"

    def __init__(self, model: str) -> None:
        super().__init__(model)
        self.offsets: dict[int, int] = {}  # 流式：每个回答已经发出的 token 文字共多少个字符

    def logprobs_of(self, entries: list[TokenLogprob], index: int = 0,
                    stream: bool = False) -> dict | None:
        """OpenAI 续写的 logprobs：四个并列的列表；text_offset 是 token 在回答文字里的起点。"""
        if not self.logprobs:
            return None
        offset = self.offsets.get(index, 0) if stream else 0
        offsets = []
        for e in entries:
            offsets.append(offset)
            offset += len(e.token)
        if stream:
            self.offsets[index] = offset
        return {"tokens": [e.token for e in entries],
                "token_logprobs": [e.logprob for e in entries],
                "top_logprobs": [{t.token: t.logprob for t in e.top_logprobs} for e in entries],
                "text_offset": offsets}

    def full(self, text: str, finish_reason: str | None, usage: dict,
             logprobs: list[TokenLogprob] = ()) -> dict:
        choice = {"index": 0, "text": text, "logprobs": self.logprobs_of(list(logprobs)),
                  "finish_reason": finish_reason}
        return {**self._head("text_completion"), "choices": [choice], "usage": usage}

    def opening(self, index: int = 0) -> None:
        return None  # 续写没有角色，第一块就是文字

    def chunk(self, *, text: str | None = None, finish_reason: str | None = None,
              logprobs: list[TokenLogprob] = (), index: int = 0) -> dict:
        lp = self.logprobs_of(list(logprobs), index, stream=True) if logprobs else None
        choice = {"index": index, "text": text or "", "logprobs": lp, "finish_reason": finish_reason}
        return {**self._chunk_head("text_completion"), "choices": [choice]}

    def usage_chunk(self, usage: dict) -> dict:
        return {**self._head("text_completion"), "choices": [], "usage": usage}


def _chat_entry(e: TokenLogprob) -> dict:
    return {"token": e.token, "logprob": e.logprob, "bytes": e.bytes,
            "top_logprobs": [{"token": t.token, "logprob": t.logprob, "bytes": t.bytes}
                             for t in e.top_logprobs]}


# ---------------------------------------------------------------------------- 采样参数与 n 个回答


def _sampling_params(req: CommonRequest, max_tokens: int) -> SamplingParams:
    logprobs, top_logprobs = req.logprobs_wanted()  # type: ignore[attr-defined]
    try:
        return SamplingParams(temperature=req.temperature, top_k=req.top_k, top_p=req.top_p,
                              ignore_eos=req.ignore_eos, max_tokens=max_tokens, seed=req.seed,
                              presence_penalty=req.presence_penalty,
                              frequency_penalty=req.frequency_penalty, logprobs=logprobs,
                              top_logprobs=top_logprobs)
    except ValueError as e:  # SamplingParams 自己的中文检查（如 top_k=0）
        raise BadRequest(str(e), _bad_field(str(e))) from None


def _choice_params(params: SamplingParams, i: int) -> SamplingParams:
    """第 i 个回答的参数：给了 seed 就用 seed + i（回到 int64 范围里），各自一串随机数、可复现。"""
    if params.seed is None:
        return params
    low, high = SEED_RANGE
    return replace(params, seed=(params.seed + i - low) % (high - low) + low)




async def _generate_n(request: Request, req: CommonRequest, text, params: SamplingParams, fmt,
                      prompt_param: str):
    """n 个回答：n 个共用提示的请求，choices 的 index 是 0..n-1。

    先发第 0 个，等它的第一段回复（此时提示已经算完、进了前缀缓存），再发其余 n-1 个：
    它们在前缀缓存里命中这段提示的页，不必再算一遍。
    """
    frontend: FrontendManager = request.app.state.frontend
    uids: list[int] = []
    firsts: list[UserReply] = []
    fmt.id = f"{fmt.prefix}-{uuid.uuid4().hex}"
    try:
        for group in ([0], range(1, req.n)):
            batch = [await frontend.submit(text, _choice_params(params, i), req.stop_list(),
                                           req.skip_special_tokens) for i in group]
            uids += batch
            for uid in batch:
                first = await _next_or_disconnect(frontend, uid, request)
                if first is None:
                    _abort_all(frontend, uids)
                    return error_response(499, "客户端已断开")
                if (error := reply_error(first, prompt_param)) is not None:
                    _abort_all(frontend, uids)
                    return error
                firsts.append(first)
    except BaseException:
        _abort_all(frontend, uids)
        raise
    if req.stream:
        include_usage = req.stream_options is not None and req.stream_options.include_usage
        fmt.include_usage = include_usage
        return StreamingResponse(_stream_n(frontend, uids, firsts, fmt, include_usage),
                                 media_type="text/event-stream")
    results = await asyncio.gather(*(_collect(frontend, uid, first, fmt, request)
                                     for uid, first in zip(uids, firsts)))
    if (error := next((r for r in results if isinstance(r, JSONResponse)), None)) is not None:
        _abort_all(frontend, uids)
        return error
    choices = [{**r["choices"][0], "index": i} for i, r in enumerate(results)]
    return {**results[0], "choices": choices, "usage": _usage_n([r["usage"] for r in results])}


def _usage_n(usages: list[dict]) -> dict[str, int]:
    """和 OpenAI 一样：提示只算一次，n 个回答的 token 相加。"""
    prompt = usages[0]["prompt_tokens"]
    completion = sum(u["completion_tokens"] for u in usages)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def _abort_all(frontend: FrontendManager, uids: list[int]) -> None:
    for uid in uids:
        frontend.abort(uid)  # 已经结束的 uid 什么都不做


async def _stream_n(frontend: FrontendManager, uids: list[int], firsts: list[UserReply], fmt,
                    include_usage: bool) -> AsyncIterator[bytes]:
    """n 个回答的流：哪个回答有新文字就先发哪个，每块的 choices[0].index 标明是第几个。"""
    done: set[int] = set()
    pending: dict[asyncio.Task, int] = {}
    usages: list[dict] = [{} for _ in uids]
    try:
        for i in range(len(uids)):
            if (opening := fmt.opening(i)) is not None:
                yield sse(opening)
        ready = list(enumerate(firsts))
        while True:
            for i, reply in ready:
                if reply.incremental_output or reply.logprobs:
                    yield sse(fmt.chunk(text=reply.incremental_output, logprobs=reply.logprobs,
                                        index=i))
                if not reply.finished:
                    pending[asyncio.ensure_future(frontend.next_reply(uids[i]))] = i
                    continue
                done.add(i)
                if reply.finish_reason == "error":
                    yield sse({"error": {"message": reply.error or "生成时出错",
                                         "type": "server_error", "param": None, "code": None}})
                else:
                    yield sse(fmt.chunk(finish_reason=reply.finish_reason, index=i))
                    usages[i] = _usage(reply)
            if not pending:
                break
            finished, _ = await asyncio.wait(list(pending), return_when=asyncio.FIRST_COMPLETED)
            ready = [(pending.pop(task), task.result()) for task in finished]
        if include_usage and all(usages):
            yield sse(fmt.usage_chunk(_usage_n(usages)))
        yield sse("[DONE]")
    except BackendUnavailable as e:
        done.update(range(len(uids)))
        yield sse({"error": {"message": f"后端已退出：{e}", "type": "server_error",
                             "param": None, "code": None}})
    finally:
        for task in pending:
            task.cancel()
        _abort_all(frontend, [uid for i, uid in enumerate(uids) if i not in done])


def run_api_server(model: ServedModel, connect: Callable[[], FrontendManager], host: str,
                   port: int, on_ready: Callable[[FrontendManager], None] | None = None,
                   sock=None) -> int | None:
    """在当前进程里跑 uvicorn，直到 Ctrl-C / SIGTERM。

    第一次 Ctrl-C / SIGTERM：不收新请求，正在生成的请求（每个都是一个打开的 HTTP 连接）最多
    再等 GRACEFUL_SECONDS 秒，到时 FrontendManager 叫醒它们：流式的收到一个 error 事件，非流式的
    得到 503，各自正常结束。第二次 Ctrl-C：不再等，立刻这样收尾。uvicorn 自己的做法是等到所有连接
    关闭（不设上限），第二次 Ctrl-C 时直接取消任务、打出一堆 CancelledError 回溯；而且它停下后会把
    信号重发给原来的处理函数——启动器在 finally 里自己收尾，不需要这一次重发。
    后端死了（或卡住了）：等待中的请求得到 503，然后服务器停下（返回 None）。
    返回让它停下的信号（启动器据此给出退出码 128 + 信号），没有信号时返回 None。
    sock：启动器事先占住的监听套接字（None 时 uvicorn 自己按 host、port 绑定）。
    """
    import uvicorn

    def ready(frontend: FrontendManager) -> None:
        if on_ready is not None:
            on_ready(frontend)

        async def exit_when_backend_dies() -> None:
            await frontend.died.wait()
            server.should_exit = True  # 正在等的请求已经得到 503；uvicorn 等它们的连接关掉再停

        app.state.exit_task = asyncio.get_running_loop().create_task(exit_when_backend_dies())

    app = create_app(model, connect, ready)
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
    server.run(sockets=None if sock is None else [sock])
    logger.info("API server 已停止")
    return server.stop_signal


GRACEFUL_SECONDS = 5  # 停服务时最多等正在生成的请求几秒
