"""tokenizer 进程：一个进程既分词又反分词（上游默认的 num_tokenizer=0，“共享的 tokenizer”）。

    API server ──TokenizeMsg/AbortMsg──▶ ┐
                                         ├─ tokenizer 进程 ──UserMsg/AbortBackendMsg──▶ 调度器
    调度器 ──DetokenizeMsg/RejectMsg───▶ ┘                 ──UserReply──▶ API server

``TokenizerHandler`` 是不碰套接字的部分（收一批消息，算出要发给调度器和 API server 的消息），
``tokenize_worker`` 是进程入口：绑定自己的 PULL 地址，连上另外两方，循环收、处理、发。

提示的长度在这里检查，不等到调度器（max_seq_len 由启动器从调度器那里转来；没有时不检查）：
  - 分词之前先数字符：字符数超过 max_seq_len × 最长 token 的字符数，提示一定放不下，
    直接拒绝，不花时间去分一个几兆的字符串（这段时间里别的请求的反分词都得等着）；
    字符多得可疑时先只分开头一截，token 已经太多就不分剩下的；
  - 分词之后：提示本身占满 max_seq_len 就拒绝；max_tokens 超过剩下的空间就截到剩下的空间
    （和上游一样），生成到那里 finish_reason 是 "length"。
启动时检查 max_seq_len 放不放得下聊天模板加一句最短的问话（startup_problem）。
"""

from __future__ import annotations

import signal
from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

import torch

from minisgl.core import SamplingParams
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
# 字符数超过 max_seq_len × 这么多，先只分开头一截看看 token 是不是已经太多（见 _check_prefix_tokens）
PREFIX_CHARS_PER_TOKEN = 8
PREFIX_MARGIN = 8  # 截断处前后的 token 可能和整段分词时不同：每截少算这么多，宁可放过不误杀
PROMPT_TOO_LONG = "提示太长"  # 这类错误消息的开头（给人看；程序认的是 PromptTooLong.code）


class PromptTooLong(ValueError):
    """提示放不下：回复带上 error_code，API server 据此回 OpenAI 的 context_length_exceeded。"""

    code = "context_length_exceeded"


class TokenizerHandler:
    """按到达的顺序处理一批消息，返回 (发给调度器的, 发给 API server 的)。"""

    def __init__(self, tokenizer, max_seq_len: int | None = None) -> None:
        self.tokenize_manager = TokenizeManager(tokenizer)
        self.detokenize_manager = DetokenizeManager(tokenizer)
        self.max_seq_len = max_seq_len  # None：不检查，交给调度器
        # byte-level BPE 的一个 token 至多解出这么多个字符：用来在分词之前给字符数定一个上界
        self.max_token_chars = max(map(len, tokenizer.get_vocab()), default=1)

    def startup_problem(self) -> str | None:
        """max_seq_len 连聊天模板加一句最短的问话都放不下时，返回原因：这样的服务器会拒绝每个对话。"""
        if self.max_seq_len is None or not getattr(self.tokenize_manager.tokenizer, "chat_template", None):
            return None
        need = len(self.tokenize_manager.encode([{"role": "user", "content": "hi"}]))
        if need + 1 <= self.max_seq_len:
            return None
        return (f"一个请求最多 {self.max_seq_len} 个 token（max_seq_len，受 KV 池大小限制），"
                f"聊天模板加一句最短的问话就要 {need} 个，放不下回答：加大 --num-pages（或 --max-seq-len-override）")

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
        params = msg.sampling_params
        try:
            self._check_chars(msg.text)
            (input_ids,) = self.tokenize_manager.tokenize([msg])
            params = self._fit_max_tokens(len(input_ids), params)
            self.detokenize_manager.add_req(msg.uid, stop=msg.stop,
                                            ignore_eos=msg.sampling_params.ignore_eos,
                                            prompt_tokens=len(input_ids),
                                            skip_special_tokens=msg.skip_special_tokens)
        except PromptTooLong as e:  # 错误的种类随回复带过去，不让对方去解析消息文字
            to_frontend.append(_error_reply(msg.uid, str(e), PromptTooLong.code))
            return
        except ValueError as e:  # 用户给的输入不对：回一个错误，进程照常服务
            to_frontend.append(_error_reply(msg.uid, str(e)))
            return
        except Exception as e:  # 例如聊天模板自己抛的错（角色顺序不对）：同样只影响这一个请求
            to_frontend.append(_error_reply(msg.uid, f"无法分词：{type(e).__name__}: {e}"))
            return
        to_backend.append(UserMsg(msg.uid, input_ids, params))

    def _check_chars(self, text: str | list[dict[str, str]]) -> None:
        if self.max_seq_len is None:
            return
        contents = [text] if isinstance(text, str) else [m.get("content", "") for m in text]
        chars = sum(map(len, contents))
        if chars > self.max_seq_len * self.max_token_chars:
            raise PromptTooLong(f"{PROMPT_TOO_LONG}：{chars} 个字符，分词后一定超过 max_seq_len "
                             f"{self.max_seq_len} 个 token（一个 token 最多 {self.max_token_chars} 个字符）")
        if chars > self.max_seq_len * PREFIX_CHARS_PER_TOKEN:
            self._check_prefix_tokens(contents)

    def _check_prefix_tokens(self, contents: list[str]) -> None:
        """字符多得可疑（但还没到一定放不下）：只分每段开头的一截，token 已经太多就不分剩下的。

        上面的上界按最长的 token 算（约 80 个字符一个），正常的文字四五个字符就是一个 token：
        几十万字符的提示能通过那一关，分完整段要一两秒，这期间每个流都在等。截在空白处，
        byte-level BPE 的预分词本来就在那里断开，开头这截的 token 和整段分词时一样（留几个余量）。
        """
        budget = self.max_seq_len * PREFIX_CHARS_PER_TOKEN
        tokenizer, counted = self.tokenize_manager.tokenizer, 0
        for content in contents:
            head = content[:budget]
            if len(head) < len(content) and (cut := max(head.rfind(" "), head.rfind("\n"))) > 0:
                head = head[:cut]  # 截在空白处
            counted += len(tokenizer.encode(head, add_special_tokens=False)) - PREFIX_MARGIN
            budget -= len(head)
            if counted >= self.max_seq_len:
                raise PromptTooLong(f"{PROMPT_TOO_LONG}：{sum(map(len, contents))} 个字符，只看开头的"
                                 f"一部分就超过了 max_seq_len {self.max_seq_len} 个 token")
            if budget <= 0:
                return

    def _fit_max_tokens(self, prompt_len: int, params: SamplingParams) -> SamplingParams:
        if self.max_seq_len is None:
            return params
        room = self.max_seq_len - prompt_len
        if room < 1:
            raise PromptTooLong(f"{PROMPT_TOO_LONG}：提示有 {prompt_len} 个 token，模型一次最多放 "
                             f"{self.max_seq_len} 个（max_seq_len），连一个新 token 的位置都没有")
        return replace(params, max_tokens=room) if params.max_tokens > room else params


def _error_reply(uid: int, reason: str, code: str | None = None) -> UserReply:
    return UserReply(uid, "", finished=True, finish_reason="error", error=reason, error_code=code)


def _unwrap(msg: BaseTokenizerMsg) -> list[BaseTokenizerMsg]:
    return list(msg.data) if isinstance(msg, BatchTokenizerMsg) else [msg]


def _raise_keyboard_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


@torch.inference_mode()
def tokenize_worker(*, tokenizer_path: str, addr: str, backend_addr: str, frontend_addr: str,
                    ack_queue: mp.Queue | None = None, max_seq_len: int | None = None) -> None:
    """tokenizer 进程的入口（由启动器用 multiprocessing 的 spawn 启动）。

    收件地址 addr 由本进程 bind；backend_addr（调度器 rank 0）和 frontend_addr（API server）由对方
    bind，这里 connect。准备好之后往 ack_queue 放一条消息。SIGTERM、Ctrl-C 都让它关好套接字退出。
    max_seq_len：调度器报上来的上限（启动器转交）；给了就在这里检查提示长度、截短 max_tokens。
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
        handler = TokenizerHandler(load_tokenizer(tokenizer_path), max_seq_len)
        problem = handler.startup_problem()
        if ack_queue is not None:  # 有问题就把原因交给启动器，由它报错退出
            ack_queue.put({"error": problem} if problem else "tokenizer 进程已就绪")
        if problem:
            return
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
