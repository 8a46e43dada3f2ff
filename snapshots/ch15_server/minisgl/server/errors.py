"""错误一律用 OpenAI 的格式：{"error": {"message", "type", "param", "code"}}。

HTTP 状态码、OpenAI 的错误类型只在这里定：参数错误、后端退出、后端报上来的错误
（UserReply.error_code）都在这里变成响应。
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from minisgl.message import UserReply
from minisgl.tokenizer.server import PromptTooLong
from minisgl.utils import init_logger

from .frontend import BackendUnavailable

logger = init_logger(__name__)


class BadRequest(Exception):
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


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        content_type = request.headers.get("content-type", "")
        message, param = _describe_validation_error(exc.errors()[0], content_type)
        return error_response(400, message, param)  # OpenAI 对参数错误用 400（FastAPI 默认 422）

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        messages = {404: f"没有这个接口：{request.method} {request.url.path}",
                    405: f"{request.url.path} 不支持 {request.method}"}
        if exc.status_code == 400 and isinstance(exc.__cause__, UnicodeDecodeError):
            messages[400] = f"请求体不是合法的 UTF-8（第 {exc.__cause__.start} 个字节起）"
        elif exc.status_code == 400 and exc.__cause__ is not None:  # FastAPI 读不了请求体
            messages[400] = f"请求体无法解析：{type(exc.__cause__).__name__}: {exc.__cause__}"
        return error_response(exc.status_code, messages.get(exc.status_code, str(exc.detail)),
                              kind="not_found_error" if exc.status_code == 404 else None)

    @app.exception_handler(BadRequest)
    async def _bad(_: Request, exc: BadRequest) -> JSONResponse:
        return error_response(400, str(exc), exc.param)

    @app.exception_handler(BackendUnavailable)
    async def _down(_: Request, exc: BackendUnavailable) -> JSONResponse:
        return error_response(503, f"后端已退出，服务器不能再生成：{exc}")

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        logger.exception("处理请求时出错")
        return error_response(500, f"服务器内部错误：{exc!r}")


def reply_error(first: UserReply, prompt_param: str) -> JSONResponse | None:
    """第一段回复就是错误（tokenizer 进程或调度器拒收）时的 400；否则 None。"""
    if not (first.finished and first.finish_reason == "error"):
        return None
    param = prompt_param if first.error_code in _PROMPT_ERRORS else None
    return error_response(400, first.error or "请求被调度器拒绝", param, code=first.error_code)


# 后端报上来的错误种类（UserReply.error_code，本身就是 OpenAI 的 code）里说的是提示那个参数的
_PROMPT_ERRORS = {PromptTooLong.code}
