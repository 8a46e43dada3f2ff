"""增量反分词：调度器每步送来一个 token，这里把它变成可以发给用户的一段文字。

难点有三个：

1. 一个汉字、一个 emoji 的 UTF-8 字节可能分在几个 token 里。只解出一半时，分词器给出的是
   替换符 U+FFFD（“�”），不能发出去。
2. 有的分词器（SentencePiece 一类：Llama 2、Mistral）单独解码一段 token 时会去掉开头的空格，
   在上下文里解码才保留。所以每次解码一个小窗口 ``ids[surr_offset:]``（surr = surrounding，
   窗口开头留作上下文的 token），再减去已经提交的前缀 ``ids[surr_offset:read_offset]`` 的解码
   结果，得到新增的文字。SmolLM2、Qwen3 的字节级 BPE 逐段拼接，没有这个问题，上下文也不碍事。
3. 已经发出的文字收不回来。“稳定文本”只在后面追加，发出去的永远是它的前缀（``DetokenizeManager``
   用 ``sent_offset`` 记发到了哪里，只增不减）；上游（和 sglang #31598）在这里会退回去，
   把已发的字再发一遍。

``IncrementalDecoder`` 只管第 1–3 条（一个请求的 token → 稳定文本）；``DetokenizeManager`` 在它
上面管每个请求的停止串、EOS、结束原因和 token 用量，要了 logprobs 的请求还把每个 token 和候选
解码成文字（OpenAI 的 token / bytes），随下一段发出的文字一起交出去。
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from minisgl.message import TokenLogprob

if TYPE_CHECKING:
    from minisgl.message import DetokenizeMsg

REPLACEMENT = "\ufffd"  # 分词器把不完整的 UTF-8 字节解成这个字符


class IncrementalDecoder:
    """一个请求的增量反分词。``push`` 返回新变稳定的文字，``flush`` 在请求结束时交出剩下的。

    两个 token 偏移：
    - ``surr_offset``：解码窗口从第几个 token 开始（窗口开头留一段已经提交的 token 当上下文）；
    - ``read_offset``：前多少个 token 的文字已经提交（``committed``，之后不会再变）。
    窗口里 ``read_offset`` 之后的 token 还没提交：它们解出的文字去掉末尾的 U+FFFD 之后也已经稳定，
    记在 ``pending`` 里，可以先发；末尾可能是半个字，等下一个 token。
    """

    def __init__(self, tokenizer, skip_special_tokens: bool = False) -> None:
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens  # True：<|im_end|> 这类特殊 token 不出现在文字里
        self.ids: list[int] = []
        self.surr_offset = 0
        self.read_offset = 0
        self.committed = ""  # = decode(ids[:read_offset])，只增不减
        self.pending = ""  # 窗口里还没提交、但已经稳定的文字

    @property
    def stable_text(self) -> str:
        """到现在为止可以放心发出去的全部文字：以后只会在它后面追加。"""
        return self.committed + self.pending

    def push(self, token_ids: Sequence[int]) -> str:
        """追加一个或几个 token，返回稳定文本新增的部分（不含半个字）。"""
        before = len(self.stable_text)
        self.ids.extend(token_ids)
        new_text = self._window_text()
        if new_text and not new_text.endswith(REPLACEMENT):
            # 窗口里的字都完整了：提交，窗口的上下文挪到刚提交的这段
            self.committed += new_text
            self.pending = ""
            self.surr_offset, self.read_offset = self.read_offset, len(self.ids)
        else:
            # 末尾也许是半个字：去掉末尾的 U+FFFD，前面的部分已经不会再变
            self.pending = new_text.rstrip(REPLACEMENT)
        after = self.stable_text
        assert len(after) >= before, "稳定文本只能变长：已经发出的文字不能收回"
        return after[before:]

    def flush(self) -> str:
        """请求结束：窗口里剩下的全部交出去。末尾不完整的字节以后也补不齐了，照分词器的
        decode 变成 U+FFFD，这样全部输出拼起来正好等于 ``tokenizer.decode(全部 token)``。"""
        before = len(self.stable_text)
        rest = self._window_text()
        assert rest.startswith(self.pending), "已经发出的文字不能收回"
        self.committed += rest
        self.pending = ""
        self.surr_offset, self.read_offset = self.read_offset, len(self.ids)
        return self.committed[before:]

    def _window_text(self) -> str:
        """窗口 ``ids[surr_offset:]`` 解出的文字里，``read_offset`` 之后那部分。"""
        prefix = self._decode(self.ids[self.surr_offset:self.read_offset])
        full = self._decode(self.ids[self.surr_offset:])
        assert full.startswith(prefix), (
            f"分词器的解码不是逐段拼接的：{prefix!r} 不是 {full!r} 的前缀")
        return full[len(prefix):]

    def _decode(self, ids: list[int]) -> str:
        # 有的分词器默认把 " ." 清理成 "."：这种清理看后一个 token，窗口相减就不对了，所以关掉
        # （SmolLM2、Qwen3 默认就不清理，结果与 tokenizer.decode 相同）
        return self.tokenizer.decode(ids, clean_up_tokenization_spaces=False,
                                     skip_special_tokens=self.skip_special_tokens)


@dataclass
class DetokenizeOutput:
    """处理一条 DetokenizeMsg 的结果：tokenizer 进程据此给 API server 发一条 UserReply。"""

    uid: int
    text: str  # 这一次要发给用户的一段（可能为空：半个字、或疑似停止串的前缀被扣住了）
    finished: bool
    finish_reason: str | None = None  # "stop"（EOS 或停止串）| "length"（到了 max_tokens）
    abort_backend: bool = False  # 停止串命中而调度器还在生成：要发 AbortBackendMsg 让它停
    prompt_tokens: int = 0
    completion_tokens: int = 0
    logprobs: list[TokenLogprob] = field(default_factory=list)  # 这段文字之前还没交出去的 token


@dataclass
class _ReqState:
    decoder: IncrementalDecoder
    stop: tuple[str, ...]
    ignore_eos: bool
    prompt_tokens: int
    completion_tokens: int = 0
    sent_offset: int = 0  # stable_text 里已经发给用户的字符数，只增不减
    held: str = ""  # 现在扣住、还没发的文字（可能是停止串的开头）
    logprobs: list[TokenLogprob] = field(default_factory=list)  # 等着随下一段文字发出去的


class DetokenizeManager:
    """tokenizer 进程里所有请求的反分词状态，按 uid 索引。

    用法：分词时 ``add_req`` 登记请求（停止串、ignore_eos、提示长度），之后每批 DetokenizeMsg
    交给 ``detokenize``。请求结束（或停止串命中、被取消）后状态删掉，迟到的消息直接忽略。
    """

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.eos_token_id: int | None = tokenizer.eos_token_id
        self.states: dict[int, _ReqState] = {}

    def add_req(self, uid: int, *, stop: Sequence[str] = (), ignore_eos: bool = False,
                prompt_tokens: int = 0, skip_special_tokens: bool = False) -> None:
        """登记一个请求。stop 是 OpenAI 的停止串：生成的文字里一出现其中某个，请求就在它前面结束。"""
        if isinstance(stop, str):
            stop = [stop]
        if not all(isinstance(s, str) for s in stop):
            raise ValueError(f"stop 必须是字符串或字符串的列表，收到 {stop!r}")
        if any(s == "" for s in stop):
            raise ValueError("stop 里不能有空字符串（空串处处都匹配，请求会立刻结束）")
        if uid in self.states:
            raise ValueError(f"请求 {uid} 已经在反分词了，uid 不能重复")
        decoder = IncrementalDecoder(self.tokenizer, skip_special_tokens)
        self.states[uid] = _ReqState(decoder, tuple(stop), ignore_eos, prompt_tokens)

    def remove_req(self, uid: int) -> bool:
        """请求被取消或被拒绝：丢掉它的状态。返回它原来在不在。"""
        return self.states.pop(uid, None) is not None

    def detokenize(self, msgs: Sequence[DetokenizeMsg]) -> list[DetokenizeOutput]:
        """按到达的顺序逐条处理；同一个请求的几条消息在同一批里也没关系。

        不认识的 uid（停止串已经命中、已经取消）跳过，不产生输出。
        """
        outputs = []
        for msg in msgs:
            state = self.states.get(msg.uid)
            if state is not None:
                outputs.append(self._one(msg.uid, state, msg.next_token, msg.finished,
                                         self._logprob_entry(msg)))
        return outputs

    def _logprob_entry(self, msg: DetokenizeMsg) -> TokenLogprob | None:
        """调度器报来的 log 概率 → OpenAI 的一项：token 单独解码的文字、它的字节、候选。"""
        if msg.logprob is None:
            return None
        top = [self._token_logprob(i, lp) for i, lp in zip(msg.top_ids, msg.top_logprobs)]
        entry = self._token_logprob(msg.next_token, msg.logprob)
        entry.top_logprobs = top
        return entry

    def _token_logprob(self, token_id: int, logprob: float) -> TokenLogprob:
        # 和 vLLM 一样：单独解码，半个字就是 U+FFFD，bytes 是这段文字的 UTF-8
        text = self.tokenizer.decode([token_id], clean_up_tokenization_spaces=False)
        return TokenLogprob(text, logprob, list(text.encode("utf-8", errors="replace")))

    def _one(self, uid: int, state: _ReqState, token: int, finished: bool,
             logprob: TokenLogprob | None = None) -> DetokenizeOutput:
        state.completion_tokens += 1  # EOS 也是模型生成的一个 token，计入用量
        hit_eos = finished and token == self.eos_token_id and not state.ignore_eos
        if not hit_eos:  # EOS 不是文字的一部分（ignore_eos 时它只是普通的一个 token）
            state.decoder.push([token])
            if logprob is not None:
                state.logprobs.append(logprob)
        if finished:
            state.decoder.flush()
        text, stop_hit = self._release(state, final=finished)
        done = finished or stop_hit
        reason = None
        if done:
            reason = "stop" if (hit_eos or stop_hit) else "length"
            del self.states[uid]
        # 调度器自己结束的请求（EOS、max_tokens）已经还了 KV 页，不必再取消
        abort = stop_hit and not finished
        logprobs: list[TokenLogprob] = []
        if text or done:  # 没有新文字的一步不发消息：它的 token 跟着下一段文字走
            logprobs, state.logprobs = state.logprobs, []
        return DetokenizeOutput(uid, text, done, reason, abort, state.prompt_tokens,
                                state.completion_tokens, logprobs)

    def _release(self, state: _ReqState, final: bool) -> tuple[str, bool]:
        """决定这一次发出稳定文本里的哪一段：停止串之前的部分；可能是停止串开头的尾巴先扣住。"""
        text = state.decoder.stable_text
        start = state.sent_offset
        # 最早出现的停止串。扣住的尾巴保证了停止串不会从已发出的部分开始，所以从 start 找起
        hits = [i for i in (text.find(s, start) for s in state.stop) if i >= 0]
        if hits:
            end = min(hits)
            state.sent_offset = end
            return text[start:end], True
        end = len(text) if final else len(text) - _held_back(text, start, state.stop)
        state.sent_offset = end
        state.held = text[end:]
        return text[start:end], False


def _held_back(text: str, start: int, stops: tuple[str, ...]) -> int:
    """text 末尾最长有多少个字符（只看 start 之后）可能是某个停止串的开头，要先扣住不发。"""
    longest = 0
    for stop in stops:
        for k in range(min(len(stop) - 1, len(text) - start), longest, -1):
            if text.endswith(stop[:k]):
                longest = k
                break
    return longest
