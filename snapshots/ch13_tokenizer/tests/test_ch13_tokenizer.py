"""第 13 章：分词与增量反分词。

- 反分词：流式输出拼起来正好等于 tokenizer.decode(全部 token)，结束之前不出现 U+FFFD，已发出的文字
  从不重发（上游的算法在同一输入上会重发，见 examples/ch13_upstream.py）；停止串跨 token 边界也能
  命中、停止串本身不发、扣住的文字在确定不是停止串时放出来；EOS 与结束原因。
- 分词：聊天模板的结果与 Hugging Face 的 apply_chat_template(tokenize=True) 逐个 id 相同；
  会自动加 BOS 的分词器也只有一个 BOS。
- tokenize_worker：真的起一个进程（spawn），测试这边扮演 API server 和调度器，走真的 ipc 套接字。
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibook.models import smollm2
from minisgl.message import DetokenizeMsg, TokenizeMsg
from minisgl.core import SamplingParams
from minisgl.tokenizer import DetokenizeManager, IncrementalDecoder, TokenizeManager
from minisgl.utils.hf import load_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from ch13_streams import byte_token_table, byte_tokens  # noqa: E402
from ch13_upstream import UpstreamDecoder  # noqa: E402

REPLACEMENT = "\ufffd"
TOK = load_tokenizer(smollm2())
EOS = TOK.eos_token_id
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def stream(steps: list[list[int]]) -> tuple[list[str], str]:
    """逐步 push，返回每一步发出的文字和结束时 flush 出来的尾巴。"""
    decoder = IncrementalDecoder(TOK)
    return [decoder.push(step) for step in steps], decoder.flush()


# --- 上游的 bug：可打印的边界往回退时，已发出的字再发一遍 ------------------------------------


def test_upstream_resends_text_ours_does_not():
    ids = TOK.encode("A 世界a好")
    # 一步带来几个 token（sglang 的投机解码就是这样）：第 3 步补全“世”又带来“界”的第一个字节
    steps = [ids[0:1], ids[1:2], ids[2:5], ids[5:9], ids[9:]]
    upstream = UpstreamDecoder(TOK)
    assert "".join(upstream.push(s) for s in steps) == "A 世世界a好"
    pieces, tail = stream(steps)
    assert pieces == ["A", " ", "世", "界a", "好"] and tail == ""  # 稳定的“世”也第 3 步就发出
    assert "".join(pieces) == "A 世界a好" == TOK.decode(ids)


# --- 性质测试：随机文字、随机切成 token、随机分步 --------------------------------------------

CHARS = st.one_of(
    st.sampled_from(list("abcXYZ019 .,!?\n")),
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FA5),  # 汉字
    st.characters(min_codepoint=0x3041, max_codepoint=0x30FA),  # 平假名、片假名
    st.characters(min_codepoint=0x1F600, max_codepoint=0x1F64F),  # emoji（4 个字节）
    st.sampled_from(["é", "ß", "Ω", "—", "“", "€", "👍🏽", "🇨🇳"]),
)
def text_of(min_size: int, max_size: int):
    return st.lists(CHARS, min_size=min_size, max_size=max_size).map("".join)


SPECIALS = [TOK.convert_tokens_to_ids(t) for t in ("<|im_start|>", "<|im_end|>", "<|endoftext|>")]


@st.composite
def token_stream(draw) -> list[int]:
    """一段随机文字切成几块，每块要么正常分词、要么一个字节一个 token；块之间偶尔夹一个特殊 token。"""
    ids: list[int] = []
    for _ in range(draw(st.integers(1, 6))):
        chunk = draw(text_of(1, 6))
        if draw(st.booleans()):
            ids += TOK.encode(chunk)
        else:
            ids += byte_tokens(TOK, chunk.encode())
        if draw(st.integers(0, 5)) == 0:
            ids.append(draw(st.sampled_from(SPECIALS)))
    return ids


def split_steps(draw, ids: list[int]) -> list[list[int]]:
    """把 token 随机分成若干步，每步 1–4 个。"""
    steps, i = [], 0
    while i < len(ids):
        n = draw(st.integers(1, 4))
        steps.append(ids[i:i + n])
        i += n
    return steps


@SETTINGS
@given(ids=token_stream(), data=st.data())
def test_streamed_pieces_equal_decode_and_never_show_a_half_character(ids, data):
    steps = split_steps(data.draw, ids)
    pieces, tail = stream(steps)
    final = TOK.decode(ids)
    assert REPLACEMENT not in final  # 构造出来的都是完整的 UTF-8
    assert "".join(pieces) + tail == final
    assert not any(REPLACEMENT in p for p in pieces)
    assert tail == ""  # 文字本身完整，结束时没有扣着的半个字


@SETTINGS
@given(raw=st.lists(st.sampled_from(sorted(byte_token_table(TOK))), max_size=24),
       data=st.data())
def test_arbitrary_bytes_still_concatenate_to_decode(raw, data):
    # 随机字节多半不是合法的 UTF-8：中途的坏字节照 decode 变成 U+FFFD，拼起来仍然等于 decode
    ids = byte_tokens(TOK, bytes(raw))
    pieces, tail = stream(split_steps(data.draw, ids))
    assert "".join(pieces) + tail == TOK.decode(ids)


def test_a_partial_character_at_finish_becomes_one_replacement_char():
    # 生成到 max_tokens 时，最后一个 emoji 只出了 2 个字节：以后也补不齐了，flush 照 decode 给出 U+FFFD
    ids = TOK.encode("好") + byte_tokens(TOK, "😀".encode()[:2])
    pieces, tail = stream([[t] for t in ids])
    assert pieces == ["", "好", "", ""] and tail == REPLACEMENT
    assert "".join(pieces) + tail == TOK.decode(ids)


def test_sent_text_never_shrinks_even_with_a_genuine_replacement_char():
    # 文字里本来就有 U+FFFD（模型输出了它的三个字节）：它在结尾时先扣住，后面来了别的字再发
    ids = TOK.encode("a") + byte_tokens(TOK, REPLACEMENT.encode()) + TOK.encode("b")
    pieces, tail = stream([[t] for t in ids])
    assert pieces == ["a", "", "", "", REPLACEMENT + "b"] and tail == ""


# --- DetokenizeManager：EOS、结束原因、停止串 -----------------------------------------------


def run_manager(manager: DetokenizeManager, uid: int, ids: list[int], finish_last: bool = True):
    msgs = [DetokenizeMsg(uid, t, finish_last and i == len(ids) - 1) for i, t in enumerate(ids)]
    return [out for m in msgs for out in manager.detokenize([m])]


def test_eos_is_not_text_and_finishes_with_stop():
    manager = DetokenizeManager(TOK)
    manager.add_req(7, prompt_tokens=11)
    outs = run_manager(manager, 7, TOK.encode("Paris.") + [EOS])
    assert "".join(o.text for o in outs) == "Paris."
    last = outs[-1]
    assert (last.finished, last.finish_reason, last.abort_backend) == (True, "stop", False)
    assert (last.prompt_tokens, last.completion_tokens) == (11, len(outs))
    assert not any(o.finished for o in outs[:-1]) and 7 not in manager.states


def test_ignore_eos_keeps_the_eos_text_and_finishes_with_length():
    manager = DetokenizeManager(TOK)
    manager.add_req(1, ignore_eos=True)
    outs = run_manager(manager, 1, TOK.encode("Hi") + [EOS])
    assert "".join(o.text for o in outs) == "Hi" + TOK.eos_token
    assert outs[-1].finish_reason == "length"
    manager.add_req(2)
    outs = run_manager(manager, 2, TOK.encode("Hi there"))  # 到了 max_tokens，最后一个不是 EOS
    assert outs[-1].finish_reason == "length" and "".join(o.text for o in outs) == "Hi there"


def test_stop_string_across_byte_tokens_is_not_returned():
    manager = DetokenizeManager(TOK)
    manager.add_req(3, stop=["世界"])
    ids = TOK.encode("你好") + byte_tokens(TOK, "世界和平".encode())
    outs = run_manager(manager, 3, ids, finish_last=False)
    assert "".join(o.text for o in outs) == "你好"
    assert outs[-1].finished and outs[-1].finish_reason == "stop" and outs[-1].abort_backend
    assert len(outs) == len(TOK.encode("你好")) + 6  # “界”的第三个字节到了就停，后面的 token 不再处理
    assert manager.detokenize([DetokenizeMsg(3, ids[-1], False)]) == []  # 迟到的消息忽略


def test_stop_string_on_the_last_token_does_not_abort_the_scheduler():
    from minisgl.message import AbortBackendMsg
    from minisgl.tokenizer import TokenizerHandler

    ids = TOK.encode("Count: 1 2 3")
    manager = DetokenizeManager(TOK)
    manager.add_req(6, stop=[" 3"])
    last = run_manager(manager, 6, ids)[-1]  # 停止串恰好由调度器的最后一个 token 补齐
    assert (last.finished, last.finish_reason, last.abort_backend) == (True, "stop", False)
    handler = TokenizerHandler(TOK)
    handler.handle([TokenizeMsg(6, "Count:", SamplingParams(), stop=[" 3"])])
    msgs = [DetokenizeMsg(6, t, i == len(ids) - 1) for i, t in enumerate(ids)]
    to_backend, to_frontend = handler.handle(msgs)
    assert not any(isinstance(m, AbortBackendMsg) for m in to_backend)  # 调度器已经还了 KV 页
    assert to_frontend[-1].finished and to_frontend[-1].finish_reason == "stop"
    handler.handle([TokenizeMsg(7, "Count:", SamplingParams(), stop=[" 2"])])
    to_backend, _ = handler.handle([DetokenizeMsg(7, t, i == len(ids) - 1) for i, t in enumerate(ids)])
    assert to_backend == [AbortBackendMsg(7)]  # 对照：提前命中就要取消


def test_held_back_text_is_released_when_it_is_not_a_stop():
    manager = DetokenizeManager(TOK)
    manager.add_req(4, stop=["Hello world"])
    ids = TOK.encode("Hello there")
    outs = run_manager(manager, 4, ids, finish_last=False)
    texts = [o.text for o in outs]
    assert texts[0] == ""  # “Hello” 可能是停止串的开头：扣住
    assert "".join(texts) == "Hello there" and not outs[-1].finished


def test_held_back_text_is_released_at_finish():
    manager = DetokenizeManager(TOK)
    manager.add_req(5, stop=["。\n\n"])
    outs = run_manager(manager, 5, TOK.encode("好。\n"))
    assert "".join(o.text for o in outs) == "好。\n" and outs[-1].finish_reason == "length"
    assert outs[-2].text == ""  # “。”当时扣住了，结束时才放出来


def reference_stop(ids: list[int], stops: list[str]) -> tuple[str, bool]:
    """参照：每来一个 token 看一遍到此为止的完整文字，第一次出现停止串就在最早的那个位置截断。"""
    for k in range(1, len(ids) + 1):
        text = TOK.decode(ids[:k]).rstrip(REPLACEMENT)
        hits = [text.find(s) for s in stops if s in text]
        if hits:
            return text[:min(hits)], True
    return TOK.decode(ids), False


@SETTINGS
@given(ids=token_stream(), data=st.data())
def test_random_stop_strings_agree_with_a_plain_reference(ids, data):
    text = TOK.decode(ids)
    stops = []
    for _ in range(data.draw(st.integers(1, 3))):
        if data.draw(st.booleans()) and len(text) > 1:  # 常常取文字里的一段，保证会命中
            i = data.draw(st.integers(0, len(text) - 1))
            stops.append(text[i:i + data.draw(st.integers(1, 4))])
        else:
            stops.append(data.draw(text_of(1, 3)))
    manager = DetokenizeManager(TOK)
    manager.add_req(0, stop=stops, ignore_eos=True)  # 随机流里可能有 EOS：当普通 token
    outs = run_manager(manager, 0, ids)
    expected, hit = reference_stop(ids, stops)
    assert "".join(o.text for o in outs) == expected
    assert outs[-1].finished and outs[-1].finish_reason == ("stop" if hit else "length")
    assert outs[-1].abort_backend == (hit and len(outs) < len(ids))  # 最后一个 token 命中：调度器已经停了
    assert not any(REPLACEMENT in o.text for o in outs)


def test_several_messages_of_one_request_in_one_batch():
    ids = TOK.encode("A 世界a好，こんにちは 😀")
    one_by_one, batched = DetokenizeManager(TOK), DetokenizeManager(TOK)
    one_by_one.add_req(9)
    batched.add_req(9)
    a = run_manager(one_by_one, 9, ids)
    b = batched.detokenize([DetokenizeMsg(9, t, i == len(ids) - 1) for i, t in enumerate(ids)])
    assert [o.text for o in a] == [o.text for o in b]
    assert "".join(o.text for o in b) == TOK.decode(ids)


def test_add_req_rejects_bad_stop_strings_and_unknown_uids_are_skipped():
    manager = DetokenizeManager(TOK)
    with pytest.raises(ValueError, match="空字符串"):
        manager.add_req(1, stop=["ok", ""])
    with pytest.raises(ValueError, match="stop 必须是"):
        manager.add_req(1, stop=[3])
    assert manager.detokenize([DetokenizeMsg(42, 5, False)]) == []
    manager.add_req(1, stop="x")
    with pytest.raises(ValueError, match="uid 不能重复"):
        manager.add_req(1)
    assert manager.remove_req(1) and not manager.remove_req(1)


# --- TokenizeManager：聊天模板 ------------------------------------------------------------

CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "用一句话介绍你自己 😀"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "2+2?"}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
     {"role": "user", "content": "こんにちは、元気？"}],
]


@pytest.fixture(scope="module")
def hf_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2())  # 另外加载一份，不共用我们的对象


@pytest.mark.parametrize("chat", CHATS, ids=range(len(CHATS)))
def test_chat_ids_equal_hugging_face(chat, hf_tokenizer):
    hf = hf_tokenizer
    ref = hf.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    (ids,) = TokenizeManager(TOK).tokenize([TokenizeMsg(0, chat, SamplingParams())])
    assert ids.dtype == torch.int32 and ids.dim() == 1
    assert ids.tolist() == list(ref)
    assert hf.decode(ref).endswith("<|im_start|>assistant\n")  # 生成提示在最后


def test_a_tokenizer_that_adds_bos_gets_one_bos_not_two():
    """会自动加 BOS 的分词器（Llama 3 一类）：模板里已经写了 BOS，先拼成字符串再 encode（上游的写法）会得到两个。"""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2(), add_bos_token=True)  # SmolLM2 的 BOS 就是 <|im_start|>
    chat = CHATS[1]
    ref = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    (ids,) = TokenizeManager(tok).tokenize([TokenizeMsg(0, chat, SamplingParams())])
    assert ids.tolist() == list(ref) and ids.tolist()[:2] != [tok.bos_token_id] * 2
    upstream_way = tok.encode(tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False))
    assert upstream_way[:2] == [tok.bos_token_id] * 2  # 这个分词器确实会让那种写法出两个 BOS：上面的检查有分量


def test_plain_text_and_bad_inputs():
    manager = TokenizeManager(TOK)
    (ids,) = manager.tokenize([TokenizeMsg(0, "The capital of France is", SamplingParams())])
    assert ids.tolist() == TOK("The capital of France is")["input_ids"]
    for bad, match in [("", "空的"), ([], "非空"), ([{"role": "user"}], "第 0 条"),
                       ([{"role": "user", "content": 3}], "第 0 条")]:
        with pytest.raises(ValueError, match=match):
            manager.tokenize([TokenizeMsg(0, bad, SamplingParams())])


# --- tokenize_worker：一个真的进程，测试这边扮演 API server 和调度器 -----------------------------


class Peers:
    """测试这边的三个套接字：发给 tokenizer 进程的 PUSH，调度器和 API server 的两个 PULL。"""

    def __init__(self, ipc_dir: str) -> None:
        from minisgl.message import BaseBackendMsg, BaseFrontendMsg, BaseTokenizerMsg
        from minisgl.utils.mp import ZmqPullQueue, ZmqPushQueue, ipc_addr

        self.addrs = {name: ipc_addr(ipc_dir, name) for name in ("tokenizer", "backend", "frontend")}
        self.backend = ZmqPullQueue(self.addrs["backend"], create=True, decoder=BaseBackendMsg.decoder)
        self.frontend = ZmqPullQueue(self.addrs["frontend"], create=True, decoder=BaseFrontendMsg.decoder)
        self.to_tokenizer = ZmqPushQueue(self.addrs["tokenizer"], create=False,
                                         encoder=BaseTokenizerMsg.encoder)

    def send(self, *msgs) -> None:
        from minisgl.message import BatchTokenizerMsg

        self.to_tokenizer.put(msgs[0] if len(msgs) == 1 else BatchTokenizerMsg(list(msgs)))

    def next_backend(self):
        return _next(self.backend, "data")

    def next_reply(self):
        return _next(self.frontend, "data")

    def stop(self) -> None:
        for q in (self.to_tokenizer, self.backend, self.frontend):
            q.stop()


def _next(queue, batch_field: str, pending: dict = {}):  # noqa: B006 - 每个队列拆开的批留到下次
    buffered = pending.setdefault(id(queue), [])
    if not buffered:
        msg = queue.get(timeout=20_000)  # 20 秒没有消息就 TimeoutError，测试失败而不是卡住
        buffered.extend(getattr(msg, batch_field) if type(msg).__name__.startswith("Batch") else [msg])
    return buffered.pop(0)


@pytest.fixture(scope="module")
def worker():
    import multiprocessing as mp
    import shutil

    from minisgl.tokenizer import tokenize_worker
    from minisgl.utils.mp import new_ipc_dir

    ipc_dir = new_ipc_dir()
    peers = Peers(ipc_dir)
    ctx = mp.get_context("spawn")
    ack = ctx.Queue()
    proc = ctx.Process(target=tokenize_worker, daemon=True, kwargs=dict(
        tokenizer_path=str(smollm2()), addr=peers.addrs["tokenizer"], backend_addr=peers.addrs["backend"],
        frontend_addr=peers.addrs["frontend"], ack_queue=ack))
    proc.start()
    try:
        assert "就绪" in ack.get(timeout=60)
        yield proc, peers
    finally:
        proc.terminate()
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        peers.stop()
        shutil.rmtree(ipc_dir, ignore_errors=True)


def play_scheduler(peers: Peers, uid: int, ids: list[int], last_finishes: bool = True) -> None:
    """像调度器那样每步发一个 DetokenizeMsg（每步一帧）。"""
    for i, t in enumerate(ids):
        peers.send(DetokenizeMsg(uid, t, last_finishes and i == len(ids) - 1))


def collect(peers: Peers, uid: int) -> list:
    replies = []
    while not replies or not replies[-1].finished:
        reply = peers.next_reply()
        assert reply.uid == uid
        replies.append(reply)
    return replies


def test_worker_tokenizes_a_chat_and_streams_the_answer(worker):
    from minisgl.message import UserMsg

    _, peers = worker
    chat = CHATS[1]
    peers.send(TokenizeMsg(1, chat, SamplingParams(max_tokens=16)))
    user_msg = peers.next_backend()
    expected = TOK.apply_chat_template(chat, add_generation_prompt=True, tokenize=True,
                                       return_dict=True)["input_ids"]
    assert isinstance(user_msg, UserMsg) and user_msg.uid == 1
    assert user_msg.input_ids.dtype == torch.int32 and user_msg.input_ids.tolist() == list(expected)
    assert user_msg.sampling_params.max_tokens == 16
    answer = byte_tokens(TOK, "你好😀".encode()) + TOK.encode(" ok")
    play_scheduler(peers, 1, answer + [EOS])
    replies = collect(peers, 1)
    assert "".join(r.incremental_output for r in replies) == "你好😀 ok"
    assert not any(REPLACEMENT in r.incremental_output for r in replies)
    last = replies[-1]
    assert (last.finish_reason, last.prompt_tokens, last.completion_tokens) == ("stop", len(expected),
                                                                                 len(answer) + 1)


def test_worker_stop_string_aborts_the_scheduler_side(worker):
    from minisgl.message import AbortBackendMsg

    _, peers = worker
    peers.send(TokenizeMsg(2, "Count:", SamplingParams(), stop=[" 3"]))
    assert peers.next_backend().uid == 2
    ids = TOK.encode(" 1 2 3 4")
    play_scheduler(peers, 2, ids, last_finishes=False)
    replies = collect(peers, 2)
    assert "".join(r.incremental_output for r in replies) == " 1 2"
    assert replies[-1].finish_reason == "stop"
    assert peers.next_backend() == AbortBackendMsg(2)
    # 停下之后调度器还在路上的 token 忽略：下一条回复是别的请求的
    peers.send(DetokenizeMsg(2, ids[-1], False), TokenizeMsg(3, [], SamplingParams()))
    reply = peers.next_reply()
    assert (reply.uid, reply.finish_reason) == (3, "error") and "非空" in reply.error


def test_worker_abort_reject_and_garbage(worker):
    from minisgl.message import AbortBackendMsg, AbortMsg, RejectMsg

    proc, peers = worker
    peers.send(TokenizeMsg(4, "Hello", SamplingParams()), AbortMsg(4))
    assert peers.next_backend().uid == 4 and peers.next_backend() == AbortBackendMsg(4)
    peers.send(TokenizeMsg(5, "Hello", SamplingParams()))
    assert peers.next_backend().uid == 5
    peers.send(RejectMsg(5, "提示太长"))
    reply = peers.next_reply()
    assert (reply.uid, reply.finished, reply.finish_reason, reply.error) == (5, True, "error", "提示太长")
    peers.to_tokenizer.put_raw(b"\xc1 not msgpack")  # 坏字节：记一条日志，进程照常服务
    peers.send(TokenizeMsg(6, "Hi", SamplingParams(), stop=[""]))
    reply = peers.next_reply()
    assert reply.uid == 6 and "空字符串" in reply.error and proc.is_alive()


def test_sigterm_stops_the_worker_cleanly(worker):
    # 放在最后：它让本模块的 tokenizer 进程退出
    proc, _ = worker
    proc.terminate()  # SIGTERM
    proc.join(20)
    assert proc.exitcode == 0


def test_logprobs_travel_with_the_text_they_belong_to():
    """每个 token 的 log 概率解码成 OpenAI 的 token / bytes；半个字的 token 等到文字发出时一起交。"""
    manager = DetokenizeManager(TOK)
    manager.add_req(5)
    ids = TOK.encode("Hi") + byte_tokens(TOK, "世".encode()) + [EOS]
    msgs = [DetokenizeMsg(5, t, i == len(ids) - 1, logprob=-0.1 * (i + 1), top_ids=[t, EOS],
                          top_logprobs=[-0.1 * (i + 1), -5.0]) for i, t in enumerate(ids)]
    outs = [out for m in msgs for out in manager.detokenize([m])]
    sent = [(o.text, [e.logprob for e in o.logprobs]) for o in outs if o.text or o.logprobs]
    n_hi = len(TOK.encode("Hi"))
    # "世" 的三个字节 token 到第三个才有文字：三个 log 概率跟着 "世" 一起出来；EOS 不是文字，没有
    assert sent[-1][0] == "世" and len(sent[-1][1]) == 3
    entries = [e for o in outs for e in o.logprobs]
    assert [e.logprob for e in entries] == pytest.approx([-0.1 * (i + 1) for i in range(len(ids) - 1)])
    first = entries[0]
    assert first.token == TOK.decode(ids[:1]) and bytes(first.bytes).decode() == first.token
    assert [t.token for t in first.top_logprobs] == [first.token, TOK.eos_token]
    assert entries[n_hi].token == REPLACEMENT  # 单独一个字节的 token 解不出完整的字（和 vLLM 一样）
    # 没要 logprobs 的请求：一项也没有
    manager.add_req(6)
    assert all(o.logprobs == [] for o in run_manager(manager, 6, TOK.encode("Hi")))


def test_skip_special_tokens_drops_them_from_the_text_only():
    special = TOK.convert_tokens_to_ids("<|im_start|>")
    ids = TOK.encode("Hi") + [special] + TOK.encode(" there") + [EOS]
    for skip in (False, True):
        manager = DetokenizeManager(TOK)
        manager.add_req(1, ignore_eos=True, skip_special_tokens=skip)
        text = "".join(o.text for o in run_manager(manager, 1, ids))
        assert text == TOK.decode(ids, skip_special_tokens=skip)
    assert "<|im_start|>" in TOK.decode(ids) and TOK.decode(ids, skip_special_tokens=True) == "Hi there"
