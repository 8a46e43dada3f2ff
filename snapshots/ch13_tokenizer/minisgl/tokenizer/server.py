"""tokenizer 进程：一个进程既分词又反分词（上游默认的 num_tokenizer=0，“共享的 tokenizer”）。

    API server ──TokenizeMsg/AbortMsg──▶ ┐
                                         ├─ tokenizer 进程 ──UserMsg/AbortBackendMsg──▶ 调度器
    调度器 ──DetokenizeMsg/RejectMsg───▶ ┘                 ──UserReply──▶ API server

``TokenizerHandler`` 是不碰套接字的部分（收一批消息，算出要发给调度器和 API server 的消息），
``tokenize_worker`` 是进程入口：绑定自己的 PULL 地址，连上另外两方，循环收、处理、发。
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Sequence

import torch

from minisgl.message import (
    AbortBackendMsg,
    AbortMsg,
    BaseBackendMsg,
    BaseFrontendMsg,
    BaseTokenizerMsg,
    BatchBackendMsg,
    BatchFrontendMsg,
    BatchTokenizerMsg,
    DetokenizeMsg,
    RejectMsg,
    TokenizeMsg,
    UserMsg,
    UserReply,
)
from minisgl.utils import init_logger
from minisgl.utils.hf import load_tokenizer
from minisgl.utils.mp import ZmqPullQueue, ZmqPushQueue

from .detokenize import DetokenizeManager
from .tokenize import TokenizeManager

if TYPE_CHECKING:
    import multiprocessing as mp

logger = init_logger(__name__)

MAX_BATCH = 256  # 一次最多攒多少条消息再处理（队列里有积压时一起处理，没有就不等）


class TokenizerHandler:
    """按到达的顺序处理一批消息，返回 (发给调度器的, 发给 API server 的)。"""

    def __init__(self, tokenizer) -> None:
        self.tokenize_manager = TokenizeManager(tokenizer)
        self.detokenize_manager = DetokenizeManager(tokenizer)

    def handle(self, msgs: Sequence[BaseTokenizerMsg]
               ) -> tuple[list[BaseBackendMsg], list[UserReply]]:
        to_backend: list[BaseBackendMsg] = []
        to_frontend: list[UserReply] = []
        for msg in msgs:
            if isinstance(msg, TokenizeMsg):
                self._tokenize(msg, to_backend, to_frontend)
            elif isinstance(msg, DetokenizeMsg):
                for out in self.detokenize_manager.detokenize([msg]):
                    if out.abort_backend:  # 调度器不知道停止串：让它停下、还回 KV 页
                        to_backend.append(AbortBackendMsg(out.uid))
                    if out.text or out.finished:  # 没有新文字的中间一步不用打扰 API server
                        to_frontend.append(UserReply(
                            out.uid, out.text, out.finished, out.finish_reason,
                            out.prompt_tokens, out.completion_tokens, logprobs=out.logprobs))
            elif isinstance(msg, AbortMsg):  # 客户端走了：API server 已经不等回复了
                if self.detokenize_manager.remove_req(msg.uid):
                    to_backend.append(AbortBackendMsg(msg.uid))
            elif isinstance(msg, RejectMsg):  # 调度器不收这个请求：告诉用户为什么
                if self.detokenize_manager.remove_req(msg.uid):
                    to_frontend.append(_error_reply(msg.uid, msg.reason))
            else:
                raise TypeError(f"tokenizer 进程不处理 {type(msg).__name__}")
        return to_backend, to_frontend

    def _tokenize(self, msg: TokenizeMsg, to_backend: list, to_frontend: list) -> None:
        try:
            (input_ids,) = self.tokenize_manager.tokenize([msg])
            self.detokenize_manager.add_req(msg.uid, stop=msg.stop,
                                            ignore_eos=msg.sampling_params.ignore_eos,
                                            prompt_tokens=len(input_ids),
                                            skip_special_tokens=msg.skip_special_tokens)
        except ValueError as e:  # 用户给的输入不对：回一个错误，进程照常服务
            to_frontend.append(_error_reply(msg.uid, str(e)))
            return
        except Exception as e:  # 例如聊天模板自己抛的错（角色顺序不对）：同样只影响这一个请求
            to_frontend.append(_error_reply(msg.uid, f"无法分词：{type(e).__name__}: {e}"))
            return
        to_backend.append(UserMsg(msg.uid, input_ids, msg.sampling_params))


def _error_reply(uid: int, reason: str, code: str | None = None) -> UserReply:
    return UserReply(uid, "", finished=True, finish_reason="error", error=reason, error_code=code)


def _unwrap(msg: BaseTokenizerMsg) -> list[BaseTokenizerMsg]:
    return list(msg.data) if isinstance(msg, BatchTokenizerMsg) else [msg]


def _raise_keyboard_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


@torch.inference_mode()
def tokenize_worker(*, tokenizer_path: str, addr: str, backend_addr: str, frontend_addr: str,
                    ack_queue: mp.Queue | None = None) -> None:
    """tokenizer 进程的入口（由启动器用 multiprocessing 的 spawn 启动）。

    收件地址 addr 由本进程 bind；backend_addr（调度器 rank 0）和 frontend_addr（API server）由对方
    bind，这里 connect。准备好之后往 ack_queue 放一条消息。SIGTERM、Ctrl-C 都让它关好套接字退出。
    """
    torch.set_num_threads(1)  # 分词不需要 torch 的线程，别和调度器抢核
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # 启动器装了自己的处理函数就用它的
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    queues = []
    try:
        receiver = ZmqPullQueue(addr, create=True, decoder=BaseTokenizerMsg.decoder)
        queues.append(receiver)
        to_backend = ZmqPushQueue(backend_addr, create=False, encoder=BaseBackendMsg.encoder)
        queues.append(to_backend)
        to_frontend = ZmqPushQueue(frontend_addr, create=False, encoder=BaseFrontendMsg.encoder)
        queues.append(to_frontend)
        handler = TokenizerHandler(load_tokenizer(tokenizer_path))
        if ack_queue is not None:
            ack_queue.put("tokenizer 进程已就绪")
        while True:
            msgs = _receive(receiver)
            backend_msgs, replies = handler.handle(msgs)
            if backend_msgs:
                to_backend.put(_batch(backend_msgs, BatchBackendMsg))
            if replies:
                to_frontend.put(_batch(replies, BatchFrontendMsg))
    except KeyboardInterrupt:
        logger.info("tokenizer 进程收到退出信号")
    finally:
        for queue in queues:
            queue.stop()


def _receive(receiver: ZmqPullQueue) -> list[BaseTokenizerMsg]:
    """等到至少一条消息；队列里已经积压的也一起拿走（最多 MAX_BATCH 条）。收到坏消息记日志跳过。"""
    msgs: list[BaseTokenizerMsg] = []
    while not msgs or (len(msgs) < MAX_BATCH and not receiver.empty()):
        raw = receiver.get_raw()
        try:
            msgs.extend(_unwrap(receiver.decode(raw)))
        except ValueError as e:
            logger.warning(f"丢掉一条无法解码的消息：{e}")
    return msgs


def _batch(msgs: list, batch_cls):
    return msgs[0] if len(msgs) == 1 else batch_cls(msgs)
