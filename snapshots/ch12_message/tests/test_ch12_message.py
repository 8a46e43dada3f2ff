"""第 12 章：消息的编码/解码，以及 ZMQ 队列在真实套接字上的收发。

每个测试用 new_ipc_dir() 新建的 IPC 临时目录（tmp_path 对 Unix 域套接字可能太长），测试结束关掉所有套接字、删掉目录。
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import pickle
import shutil

import msgpack
import pytest
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
    ExitMsg,
    RejectMsg,
    TokenizeMsg,
    TokenLogprob,
    UserMsg,
    UserReply,
    deserialize_type,
    serialize_type,
)
from minisgl.utils.mp import (
    ZmqAsyncPullQueue,
    ZmqAsyncPushQueue,
    ZmqPubQueue,
    ZmqPullQueue,
    ZmqPushQueue,
    ZmqSubQueue,
    ipc_addr,
    new_ipc_dir,
    pack,
    unpack,
)

TIMEOUT_MS = 5000  # 任何一次接收最多等这么久，测试不会卡死


@pytest.fixture
def ipc_dir():
    path = new_ipc_dir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def queues():
    """登记本测试建的队列，结束时全部 stop。"""
    made = []
    yield made
    for q in made:
        q.stop()


def wire(msg, base):
    """完整走一遍线上格式：对象 → 字典 → msgpack 字节 → 字典 → 对象。"""
    return unpack(base.decoder, pack(base.encoder, msg))


def same(a, b) -> bool:
    """逐字段比较；张量要求 dtype、形状和每一个比特都相同。"""
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and bytes(a.contiguous().view(torch.uint8).numpy()) ==
                bytes(b.contiguous().view(torch.uint8).numpy()))
    if hasattr(a, "__dataclass_fields__"):
        return type(a) is type(b) and all(same(getattr(a, f), getattr(b, f))
                                          for f in a.__dataclass_fields__)
    if isinstance(a, (list, tuple)):
        return isinstance(b, list) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


SP = SamplingParams(temperature=0.7, top_k=20, top_p=0.9, ignore_eos=True, max_tokens=33,
                    seed=-(2**62), presence_penalty=0.5, frequency_penalty=-1.0, logprobs=True,
                    top_logprobs=3)
IDS = torch.tensor([1, 22, 333, 2**31 - 1], dtype=torch.int32)

BACKEND = [
    UserMsg(uid=7, input_ids=IDS, sampling_params=SP),
    AbortBackendMsg(uid=3),
    ExitMsg(),
    BatchBackendMsg(data=[UserMsg(uid=1, input_ids=IDS[:2], sampling_params=SamplingParams()),
                          AbortBackendMsg(uid=1), ExitMsg()]),
]
TOKENIZER = [
    TokenizeMsg(uid=1, text="你好，世界 🌍", sampling_params=SP),
    TokenizeMsg(uid=2, text=[{"role": "user", "content": "hi"}], sampling_params=SamplingParams(),
                stop=["\n\n", "。"]),
    DetokenizeMsg(uid=3, next_token=151645, finished=True),
    DetokenizeMsg(uid=6, next_token=42, finished=False, logprob=-0.25, top_ids=[42, 7],
                  top_logprobs=[-0.25, -1.5]),
    AbortMsg(uid=4),
    RejectMsg(uid=5, reason="提示词有 5000 个 token，超过上限 2048"),
    BatchTokenizerMsg(data=[DetokenizeMsg(uid=i, next_token=i * 10, finished=i == 2)
                            for i in range(3)]),
]
FRONTEND = [
    UserReply(uid=1, incremental_output="世界", finished=False),
    UserReply(uid=2, incremental_output="", finished=True, finish_reason="length", prompt_tokens=12,
              completion_tokens=4),
    UserReply(uid=3, incremental_output="", finished=True, finish_reason="error", error="太长了",
              error_code="context_length_exceeded"),
    BatchFrontendMsg(data=[UserReply(uid=9, incremental_output="a", finished=False)] * 2),
    UserReply(uid=4, incremental_output="世", finished=False, logprobs=[
        TokenLogprob("世", -0.5, list("世".encode()), [TokenLogprob("世", -0.5, [228, 184, 150]),
                                                      TokenLogprob("\ufffd", -2.0, [239, 191, 189])])]),
]


def test_logprobs_come_back_as_their_own_types():
    """新 token 的 log 概率随 DetokenizeMsg 过去，解码出的候选随 UserReply 回来，类型不丢。"""
    back = wire(TOKENIZER[3], BaseTokenizerMsg)
    assert (back.logprob, back.top_ids, back.top_logprobs) == (-0.25, [42, 7], [-0.25, -1.5])
    reply = wire(FRONTEND[-1], BaseFrontendMsg)
    (entry,) = reply.logprobs
    assert type(entry) is TokenLogprob and type(entry.top_logprobs[1]) is TokenLogprob
    assert entry == FRONTEND[-1].logprobs[0] and bytes(entry.bytes).decode() == "世"
    # 不要 logprobs 的消息不带这些字段的值：默认值在对面重新生成
    plain = wire(TOKENIZER[2], BaseTokenizerMsg)
    assert (plain.logprob, plain.top_ids) == (None, [])


@pytest.mark.parametrize("base, msg", [(BaseBackendMsg, m) for m in BACKEND]
                         + [(BaseTokenizerMsg, m) for m in TOKENIZER]
                         + [(BaseFrontendMsg, m) for m in FRONTEND],
                         ids=lambda x: type(x).__name__ if not isinstance(x, type) else "")
def test_every_message_survives_the_wire(base, msg):
    back = wire(msg, base)
    assert back is not msg and same(msg, back), (msg, back)


def test_nested_sampling_params_come_back_as_sampling_params():
    back = wire(BACKEND[0], BaseBackendMsg)
    assert type(back.sampling_params) is SamplingParams and back.sampling_params == SP
    assert back.input_ids.dtype == torch.int32 and back.input_ids.tolist() == IDS.tolist()


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32,
                                   torch.int64, torch.float16, torch.bfloat16, torch.float32,
                                   torch.float64])
def test_tensors_round_trip_bit_for_bit(dtype):
    g = torch.Generator().manual_seed(0)
    values = torch.randn(37, generator=g, dtype=torch.float64) * 1000
    if dtype.is_floating_point:
        values[:3] = torch.tensor([float("inf"), float("-inf"), -0.0], dtype=torch.float64)
    t = values.to(dtype)
    back = unpack(lambda d: deserialize_type({}, d), pack(serialize_type, t))
    assert same(t, back)
    back[0] = back[1]  # 解码出的张量拥有自己的可写内存


def test_bfloat16_is_carried_as_its_own_bits():
    # bfloat16 的 1.0 是 0x3F80：线上的两个字节必须正是这 16 位（小端）
    d = serialize_type(torch.tensor([1.0, -2.0], dtype=torch.bfloat16))
    assert d["dtype"] == "bfloat16"
    assert d["buffer"] == (0x3F80).to_bytes(2, "little") + (0xC000).to_bytes(2, "little")


def test_non_contiguous_tensor_sends_its_elements():
    t = torch.arange(10, dtype=torch.int32)[::3]
    assert not t.is_contiguous()
    back = deserialize_type({}, serialize_type(t))
    assert back.tolist() == [0, 3, 6, 9]


def test_msgpack_keeps_bytes_and_str_apart():
    raw = pack(serialize_type, UserMsg(uid=1, input_ids=IDS, sampling_params=SP))
    data = msgpack.unpackb(raw, raw=False)
    assert isinstance(data["input_ids"]["buffer"], bytes) and isinstance(data["__type__"], str)


# ---------------------------------------------------------------- 坏输入：中文报错


def test_garbage_bytes_get_a_clear_error():
    for raw in [b"\xc1", b"\x92\x01", pickle.dumps(ExitMsg())[:5]]:
        with pytest.raises(ValueError, match="不是合法的 msgpack"):
            unpack(BaseBackendMsg.decoder, raw)


def test_unknown_type_tag_is_refused_by_name():
    raw = msgpack.packb({"__type__": "os.system", "uid": 1})
    with pytest.raises(ValueError, match=r"未知的消息类型 'os.system'.*UserMsg"):
        unpack(BaseBackendMsg.decoder, raw)


def test_a_family_decoder_knows_only_its_own_family():
    raw = pack(BaseTokenizerMsg.encoder, AbortMsg(uid=1))
    with pytest.raises(ValueError, match="未知的消息类型 'AbortMsg'"):
        unpack(BaseBackendMsg.decoder, raw)
    with pytest.raises(ValueError, match="未知的消息类型 'SamplingParams'"):
        BaseFrontendMsg.decoder(serialize_type(SP))
    with pytest.raises(ValueError, match="最外层必须是一条消息"):
        BaseBackendMsg.decoder(serialize_type(SP))


@pytest.mark.parametrize("data, pattern", [
    (5, "带 '__type__' 类型标签的字典"),
    ({"uid": 1}, "带 '__type__' 类型标签的字典"),
    ({"__type__": "AbortBackendMsg", "uid": 1, "extra": 2}, r"字段与收到的不符：多了 \['extra'\]，缺了 \[\]"),
    ({"__type__": "UserMsg", "uid": 1}, r"缺了 \['input_ids', 'sampling_params'\]"),
    ({"__type__": "BatchBackendMsg", "data": [serialize_type(SP)]}, "混进了 SamplingParams"),
    ({"__type__": "BatchBackendMsg", "data": 3}, "data 应该是列表"),
    ({"__type__": "Tensor", "buffer": b"\0" * 3, "dtype": "int32"}, "整数倍"),
    ({"__type__": "Tensor", "buffer": b"", "dtype": "object"}, "dtype 'object' 不认识"),
    ({"__type__": "Tensor", "buffer": "abc", "dtype": "int32"}, "应该是 bytes"),
])
def test_malformed_dicts_are_refused(data, pattern):
    with pytest.raises(ValueError, match=pattern):
        BaseBackendMsg.decoder(data)


def test_sampling_params_are_validated_again_on_arrival():
    data = serialize_type(UserMsg(uid=1, input_ids=IDS, sampling_params=SP))
    data["sampling_params"]["temperature"] = -1.0
    with pytest.raises(ValueError, match="temperature"):
        BaseBackendMsg.decoder(data)


def test_unsendable_values_are_refused_when_encoding():
    with pytest.raises(ValueError, match="一维张量"):
        UserMsg(uid=1, input_ids=torch.zeros(2, 2, dtype=torch.int32), sampling_params=SP).encoder()
    with pytest.raises(ValueError, match="不支持的张量类型"):
        serialize_type(torch.zeros(2, dtype=torch.complex64))
    with pytest.raises(TypeError, match="不知道怎样序列化 object"):
        AbortBackendMsg(uid=object()).encoder()
    with pytest.raises(ValueError, match="类型标签"):
        TokenizeMsg(uid=1, text=[{"__type__": "x"}], sampling_params=SP).encoder()


# ---------------------------------------------------------------- 地址


def test_ipc_dirs_are_fresh_and_addresses_are_checked(ipc_dir):
    other = new_ipc_dir()
    try:
        assert other != ipc_dir and os.path.isdir(other) and not os.listdir(other)
        assert ipc_addr(ipc_dir, "backend") == f"ipc://{ipc_dir}/backend"
    finally:
        shutil.rmtree(other)
    with pytest.raises(ValueError, match="路径太长"):
        ipc_addr(ipc_dir, "x" * 120)


def test_two_servers_use_the_same_names_without_colliding(ipc_dir, queues):
    other = new_ipc_dir()
    try:
        a = ZmqPullQueue(ipc_addr(ipc_dir, "backend"), create=True, decoder=BaseBackendMsg.decoder)
        b = ZmqPullQueue(ipc_addr(other, "backend"), create=True, decoder=BaseBackendMsg.decoder)
        pa = ZmqPushQueue(ipc_addr(ipc_dir, "backend"), create=False, encoder=BaseBackendMsg.encoder)
        pb = ZmqPushQueue(ipc_addr(other, "backend"), create=False, encoder=BaseBackendMsg.encoder)
        queues += [a, b, pa, pb]
        pa.put(AbortBackendMsg(uid=1))
        pb.put(AbortBackendMsg(uid=2))
        assert a.get(TIMEOUT_MS).uid == 1 and b.get(TIMEOUT_MS).uid == 2
        assert a.empty() and b.empty()
    finally:
        shutil.rmtree(other)


def test_a_second_ipc_bind_silently_steals_the_address(ipc_dir, queues):
    # 这正是每个服务要用自己的新目录的原因：ipc 地址被第二次 bind 时不报错，
    # 之后连上来的发件方全都连到第二个，第一个再也收不到消息
    addr = ipc_addr(ipc_dir, "backend")
    first = ZmqPullQueue(addr, create=True, decoder=BaseBackendMsg.decoder)
    second = ZmqPullQueue(addr, create=True, decoder=BaseBackendMsg.decoder)
    push = ZmqPushQueue(addr, create=False, encoder=BaseBackendMsg.encoder)
    queues += [first, second, push]
    push.put(AbortBackendMsg(uid=1))
    assert second.get(TIMEOUT_MS).uid == 1
    assert first.socket.poll(200) == 0


def test_bind_failure_names_the_address(ipc_dir):
    addr = ipc_addr(os.path.join(ipc_dir, "no-such-dir"), "backend")
    with pytest.raises(RuntimeError, match="无法 bind 地址 ipc://.*no-such-dir"):
        ZmqPullQueue(addr, create=True, decoder=BaseBackendMsg.decoder)


# ---------------------------------------------------------------- PUSH / PULL


def test_push_pull_keeps_order_and_raw_bytes(ipc_dir, queues):
    addr = ipc_addr(ipc_dir, "backend")
    pull = ZmqPullQueue(addr, create=True, decoder=BaseBackendMsg.decoder)
    push = ZmqPushQueue(addr, create=False, encoder=BaseBackendMsg.encoder)
    queues += [pull, push]
    assert pull.empty()
    for uid in range(100):
        push.put(AbortBackendMsg(uid=uid))
    push.put(BACKEND[0])
    assert [pull.get(TIMEOUT_MS).uid for _ in range(100)] == list(range(100))
    raw = pull.get_raw(TIMEOUT_MS)  # 原样拿字节（rank 0 转发给其他 rank 时就这样用）
    assert raw == pack(BaseBackendMsg.encoder, BACKEND[0])
    assert same(pull.decode(raw), BACKEND[0])
    assert pull.empty()


def test_get_with_timeout_raises_instead_of_hanging(ipc_dir, queues):
    pull = ZmqPullQueue(ipc_addr(ipc_dir, "x"), create=True, decoder=BaseBackendMsg.decoder)
    queues.append(pull)
    with pytest.raises(TimeoutError, match="50 毫秒内没有"):
        pull.get(timeout=50)


def test_many_pushers_into_one_pull(ipc_dir, queues):
    # tokenizer 进程的收件箱：API server 和调度器都往里推
    addr = ipc_addr(ipc_dir, "tokenizer")
    pull = ZmqPullQueue(addr, create=True, decoder=BaseTokenizerMsg.decoder)
    pushers = [ZmqPushQueue(addr, create=False, encoder=BaseTokenizerMsg.encoder) for _ in range(3)]
    queues += [pull, *pushers]
    for i, p in enumerate(pushers):
        for k in range(20):
            p.put(DetokenizeMsg(uid=i, next_token=k, finished=False))
    got = [pull.get(TIMEOUT_MS) for _ in range(60)]
    for i in range(3):  # 每个发件方自己的消息保持顺序
        assert [m.next_token for m in got if m.uid == i] == list(range(20))


def _scheduler_child(backend: str, tokenizer: str) -> None:
    """子进程里的"调度器"：收 UserMsg，把它的每个 token 逐个作为 DetokenizeMsg 发回去。"""
    pull = ZmqPullQueue(backend, create=True, decoder=BaseBackendMsg.decoder)
    push = ZmqPushQueue(tokenizer, create=False, encoder=BaseTokenizerMsg.encoder)
    while not isinstance(msg := pull.get(), ExitMsg):
        for i, tok in enumerate(msg.input_ids.tolist()):
            push.put(DetokenizeMsg(uid=msg.uid, next_token=tok, finished=i == len(msg.input_ids) - 1))
    pull.stop()
    push.stop()


def test_messages_cross_a_process_boundary(ipc_dir, queues):
    backend, tokenizer = ipc_addr(ipc_dir, "backend"), ipc_addr(ipc_dir, "tokenizer")
    inbox = ZmqPullQueue(tokenizer, create=True, decoder=BaseTokenizerMsg.decoder)
    # 先 connect 也没关系：PUSH 会把消息留在本地，直到对端 bind 之后再送出
    outbox = ZmqPushQueue(backend, create=False, encoder=BaseBackendMsg.encoder)
    queues += [inbox, outbox]
    child = mp.get_context("spawn").Process(target=_scheduler_child, args=(backend, tokenizer))
    child.start()
    try:
        outbox.put(UserMsg(uid=5, input_ids=IDS, sampling_params=SP))
        replies = [inbox.get(timeout=30_000) for _ in range(len(IDS))]
        assert [r.next_token for r in replies] == IDS.tolist()
        assert [r.finished for r in replies] == [False] * (len(IDS) - 1) + [True]
        outbox.put(ExitMsg())
        child.join(timeout=30)
        assert child.exitcode == 0
    finally:
        if child.is_alive():
            child.kill()
            child.join()


# ---------------------------------------------------------------- PUB / SUB


def _wait_until_subscribed(pub: ZmqPubQueue, subs: list[ZmqSubQueue]) -> None:
    """发探针直到每个订阅者都收到至少一个：此后发布的消息它们都能收到。再把探针清空。"""
    for _ in range(TIMEOUT_MS // 10):
        pub.put(ExitMsg())
        if all(sub.socket.poll(10) for sub in subs):
            break
    else:
        raise AssertionError("订阅者一直没连上")
    pub.put(AbortBackendMsg(uid=-1))  # 最后一个探针：收到它就说明之前的探针都清空了
    for sub in subs:
        while isinstance(msg := sub.get(TIMEOUT_MS), ExitMsg):
            pass
        assert msg == AbortBackendMsg(uid=-1)


def test_pub_sub_drops_what_was_sent_before_the_subscriber_joined(ipc_dir, queues):
    addr = ipc_addr(ipc_dir, "broadcast")
    pub = ZmqPubQueue(addr, create=True, encoder=BaseBackendMsg.encoder)
    queues.append(pub)
    for uid in range(10):  # 还没有订阅者：这 10 条直接被丢掉
        pub.put(AbortBackendMsg(uid=uid))
    subs = [ZmqSubQueue(addr, create=False, decoder=BaseBackendMsg.decoder) for _ in range(2)]
    queues += subs
    _wait_until_subscribed(pub, subs)
    for uid in range(100, 110):
        pub.put(AbortBackendMsg(uid=uid))
    raw = pack(BaseBackendMsg.encoder, BACKEND[3])
    pub.put_raw(raw)
    for sub in subs:  # 每个订阅者都收到同步之后的全部消息，且只有这些
        assert [sub.get(TIMEOUT_MS).uid for _ in range(10)] == list(range(100, 110))
        assert same(sub.get(TIMEOUT_MS), BACKEND[3])
        assert sub.empty()


@pytest.mark.parametrize("hwm", [None, 0])
def test_pub_sub_high_water_mark(ipc_dir, queues, hwm):
    """订阅者不读时一口气发 5000 条：默认高水位丢掉一部分，hwm=0 一条不丢。"""
    addr = ipc_addr(ipc_dir, "broadcast")
    pub = ZmqPubQueue(addr, create=True, encoder=BaseBackendMsg.encoder, hwm=hwm)
    sub = ZmqSubQueue(addr, create=False, decoder=BaseBackendMsg.decoder, hwm=hwm)
    queues += [pub, sub]
    _wait_until_subscribed(pub, [sub])
    for uid in range(5000):
        pub.put(AbortBackendMsg(uid=uid))
    got = []
    try:
        while True:
            got.append(sub.get(200).uid)
    except TimeoutError:
        pass
    if hwm == 0:
        assert got == list(range(5000))
    else:
        assert 0 < len(got) < 5000 and got == sorted(set(got))  # 丢了一部分，剩下的顺序不变


# ---------------------------------------------------------------- asyncio


def test_async_push_pull_does_not_block_the_event_loop(ipc_dir, queues):
    addr = ipc_addr(ipc_dir, "frontend")

    async def main():
        pull = ZmqAsyncPullQueue(addr, create=True, decoder=BaseFrontendMsg.decoder)
        push = ZmqAsyncPushQueue(addr, create=False, encoder=BaseFrontendMsg.encoder)
        queues.extend([pull, push])
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        async def until_ticks(n):
            while ticks < n:
                await asyncio.sleep(0.001)

        tick_task = asyncio.create_task(ticker())
        waiting = asyncio.create_task(pull.get())  # 先开始等，消息稍后才来
        await asyncio.wait_for(until_ticks(20), TIMEOUT_MS / 1000)  # 等待期间别的协程照常运行
        assert not waiting.done()
        await push.put(FRONTEND[1])
        got = await asyncio.wait_for(waiting, TIMEOUT_MS / 1000)
        await push.put_raw(pack(BaseFrontendMsg.encoder, FRONTEND[3]))
        got2 = await asyncio.wait_for(pull.get(), TIMEOUT_MS / 1000)
        tick_task.cancel()
        return got, got2

    got, got2 = asyncio.run(main())
    assert same(got, FRONTEND[1]) and same(got2, FRONTEND[3])


def test_stop_is_idempotent_and_does_not_hang_without_a_peer(ipc_dir):
    push = ZmqPushQueue(ipc_addr(ipc_dir, "nobody"), create=False, encoder=BaseBackendMsg.encoder)
    push.put(ExitMsg())  # 没有人收：stop 最多等 LINGER_MS
    push.stop()
    push.stop()
