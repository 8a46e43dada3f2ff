"""第 1 章的测试：长度记账、SamplingParams 校验、Context 的批次守卫、env 与 utils。"""

from __future__ import annotations

import io
import logging
import math
import random

import pytest
import torch

from minisgl.core import Batch, Context, Req, SamplingParams, get_global_ctx, set_global_ctx
from minisgl.env import ENV, EnvError
from minisgl.utils import (
    align_ceil,
    device_of,
    div_ceil,
    div_even,
    init_logger,
    is_cuda,
    set_log_rank,
    to_device,
    torch_dtype,
)


def make_req(prompt_len: int, output_len: int, cached_len: int = 0, uid: int = 0) -> Req:
    ids = torch.randint(0, 1000, (prompt_len,), dtype=torch.int32)
    return Req(input_ids=ids, table_idx=uid, cached_len=cached_len, output_len=output_len,
               uid=uid, sampling_params=SamplingParams(max_tokens=output_len), cache_handle=None)


# ---------------------------------------------------------------- Req：长度记账

@pytest.mark.parametrize("seed", range(20))
def test_whole_lifetime_bookkeeping(seed):
    rng = random.Random(seed)
    prompt_len, output_len = rng.randint(1, 40), rng.randint(1, 12)
    cached = rng.randint(0, prompt_len - 1)  # 前缀缓存命中的长度，至少留 1 个 token 要算
    req = make_req(prompt_len, output_len, cached_len=cached)
    prompt = req.input_ids.clone()
    assert (req.device_len, req.max_device_len) == (prompt_len, prompt_len + output_len)
    assert req.extend_len == prompt_len - cached and req.remain_len == output_len

    computed: list[int] = list(range(cached))  # 已经进了 KV 池的位置
    generated: list[int] = []
    steps = 0
    while True:
        step_positions = list(range(req.cached_len, req.device_len))
        assert len(step_positions) == req.extend_len
        assert req.extend_len == (prompt_len - cached if steps == 0 else 1)
        computed += step_positions
        token = rng.randint(0, 1000)
        req.complete_one()
        req.append_host(torch.tensor([token], dtype=torch.int32))
        generated.append(token)
        steps += 1
        # 每一步之后：算过的位置恰好是 [0, cached_len)，CPU 上的 token 恰好 device_len 个
        assert computed == list(range(req.cached_len))
        assert req.cached_len == req.device_len - 1
        assert len(req.input_ids) == req.device_len
        assert req.remain_len == output_len - len(generated)
        if not req.can_decode:
            break

    assert steps == output_len and req.remain_len == 0
    assert req.device_len == req.max_device_len == prompt_len + output_len
    assert torch.equal(req.input_ids[:prompt_len], prompt)
    assert req.input_ids[prompt_len:].tolist() == generated
    assert req.input_ids.dtype == torch.int32
    with pytest.raises(AssertionError, match="不能再前进"):
        req.complete_one()  # remain_len 为 0 就不能再 decode


def test_complete_one_books_the_step_before_the_token_reaches_cpu():
    """complete_one 在发出前向时调用：下一步要算的位置只依赖记账，不依赖拷回 CPU 的 token。"""
    req = make_req(5, 4, cached_len=2)
    req.complete_one()  # 第 1 步（prefill）已发出，新 token 还在设备上
    assert (req.cached_len, req.device_len, len(req.input_ids)) == (5, 6, 5)
    assert list(range(req.cached_len, req.device_len)) == [5]  # 第 2 步的位置已经定了
    req.complete_one()  # 第 2 步也发出了，第 1 步的 token 仍未回到 CPU
    assert (req.cached_len, req.device_len, len(req.input_ids)) == (6, 7, 5)
    assert req.remain_len == 2


def test_append_host_accepts_int_and_scalar_tensor():
    req = make_req(3, 5)
    req.complete_one()
    req.append_host(7)
    req.complete_one()
    req.append_host(torch.tensor(8, dtype=torch.int64))  # 0 维、int64 也行，存成 int32
    assert req.input_ids[-2:].tolist() == [7, 8] and req.input_ids.dtype == torch.int32


def test_append_host_may_lag_behind_but_never_overtake():
    req = make_req(4, 5)
    with pytest.raises(AssertionError, match="先 complete_one"):
        req.append_host(1)  # 还没前进就追加：多出来的 token 没有位置
    req.complete_one()
    req.complete_one()  # 重叠调度：第二步已经开始，第一步的结果才拷回 CPU
    req.append_host(1)
    req.append_host(2)
    assert len(req.input_ids) == req.device_len and req.input_ids[-2:].tolist() == [1, 2]
    with pytest.raises(AssertionError):
        req.append_host(3)
    assert len(req.input_ids) == req.device_len  # 被拒绝的追加什么都没改


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(cached_len=3), "cached_len"),  # 缓存了全部提示，这一步没东西可算
        (dict(cached_len=-1), "cached_len"),
        (dict(output_len=0), "output_len"),
        (dict(cached_len=1.0), "cached_len"),
        (dict(output_len=2.0), "output_len"),
        (dict(input_ids=torch.tensor([1, 2, 3])), "int64"),  # 默认 int64
        (dict(input_ids=torch.zeros(1, 3, dtype=torch.int32)), r"\(1, 3\)"),
        (dict(input_ids=[1, 2, 3]), "list"),
        (dict(input_ids=torch.zeros(0, dtype=torch.int32), cached_len=0), "cached_len"),
    ],
)
def test_req_rejects_bad_construction(kwargs, match):
    args = dict(input_ids=torch.tensor([1, 2, 3], dtype=torch.int32), table_idx=0, cached_len=0,
                output_len=2, uid=0, sampling_params=SamplingParams(), cache_handle=None)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match) as info:
        Req(**args)
    assert "收到" in str(info.value)


def test_req_fields_are_keyword_only_and_identity_hashed():
    with pytest.raises(TypeError):
        Req(torch.tensor([1], dtype=torch.int32), 0, 0, 1, 0, SamplingParams(), None)
    a, b = make_req(3, 2), make_req(3, 2)
    b.input_ids = a.input_ids
    assert a != b and len({a, b}) == 2  # 内容一样也是两个请求
    assert repr(a) == "Req(uid=0, table_idx=0, cached_len=0, device_len=3, max_device_len=5)"


# ---------------------------------------------------------------- SamplingParams

def test_sampling_params_defaults_and_is_greedy():
    p = SamplingParams()
    assert (p.temperature, p.top_k, p.top_p, p.ignore_eos, p.max_tokens) == (0.0, -1, 1.0, False,
                                                                             1024)
    assert p.is_greedy
    assert SamplingParams(temperature=0.8, top_k=1).is_greedy  # 只在第 1 名里采样 = argmax
    assert SamplingParams(temperature=0.0, top_p=0.5).is_greedy  # 温度为 0 就是 argmax
    assert not SamplingParams(temperature=0.8).is_greedy
    assert not SamplingParams(temperature=1.0, top_k=50, top_p=0.9).is_greedy
    # 小到 logits / t 会溢出的温度按贪心处理；阈值以上才真的采样
    assert SamplingParams(temperature=1e-40).is_greedy
    assert not SamplingParams(temperature=1e-3).is_greedy


def test_sampling_params_new_fields_defaults_and_accepted_values():
    p = SamplingParams()
    assert (p.seed, p.presence_penalty, p.frequency_penalty, p.logprobs, p.top_logprobs) == (
        None, 0.0, 0.0, False, 0)
    assert not p.has_penalty
    q = SamplingParams(seed=-(2**63), presence_penalty=-2, frequency_penalty=2.0, logprobs=True,
                       top_logprobs=20)
    assert q.has_penalty and q.seed == -(2**63)
    assert SamplingParams(frequency_penalty=0.5).has_penalty


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(temperature=-0.1), "temperature"),
        (dict(temperature=float("nan")), "temperature"),
        (dict(temperature=float("inf")), "temperature"),
        (dict(temperature="0.5"), "temperature"),
        (dict(top_k=0), "top_k"),
        (dict(top_k=-2), "top_k"),
        (dict(top_k=2.0), "top_k"),
        (dict(top_p=0.0), "top_p"),
        (dict(top_p=1.01), "top_p"),
        (dict(max_tokens=0), "max_tokens"),
        (dict(max_tokens=True), "max_tokens"),
        (dict(ignore_eos=1), "ignore_eos"),
        (dict(seed=1.5), "seed"),
        (dict(seed=True), "seed"),
        (dict(seed=2**63), "seed"),
        (dict(presence_penalty=2.5), "presence_penalty"),
        (dict(presence_penalty=float("nan")), "presence_penalty"),
        (dict(frequency_penalty=-2.01), "frequency_penalty"),
        (dict(frequency_penalty="1"), "frequency_penalty"),
        (dict(logprobs=1), "logprobs"),
        (dict(logprobs=True, top_logprobs=21), "top_logprobs"),
        (dict(logprobs=True, top_logprobs=-1), "top_logprobs"),
        (dict(top_logprobs=3), "top_logprobs"),  # 要 top_logprobs 就得先要 logprobs
    ],
)
def test_sampling_params_rejects_bad_values(kwargs, name):
    with pytest.raises(ValueError, match=name) as info:
        SamplingParams(**kwargs)
    assert "收到" in str(info.value)  # 报错里带着收到的值


# ---------------------------------------------------------------- Batch

def test_batch_basics_and_late_fields():
    reqs = [make_req(n, 2, uid=i) for i, n in enumerate([3, 5])]
    batch = Batch(reqs=reqs, phase="prefill")
    assert batch.is_prefill and not batch.is_decode and batch.size == 2
    for name in ("input_ids", "positions", "out_loc", "padded_reqs", "attn_metadata"):
        with pytest.raises(AttributeError, match=name):  # 还没填
            getattr(batch, name)
    batch.padded_reqs = reqs + [reqs[0]]  # 补一个占位请求
    assert batch.padded_size == 3 and batch.size == 2
    assert Batch(reqs=reqs, phase="decode").is_decode
    assert repr(batch) == "Batch(phase='prefill', size=2, uids=[0, 1])"
    with pytest.raises(AssertionError):
        Batch(reqs=reqs, phase="extend")
    with pytest.raises(AssertionError):
        Batch(reqs=[], phase="decode")


def test_prefill_positions_with_cached_prefix():
    rng = random.Random(0)
    reqs = []
    for uid in range(6):
        n = rng.randint(1, 20)
        reqs.append(make_req(n, 3, cached_len=rng.randint(0, n - 1), uid=uid))
    positions = torch.cat([torch.arange(r.cached_len, r.device_len) for r in reqs])
    assert len(positions) == sum(r.extend_len for r in reqs)
    offset = 0
    for r in reqs:  # 每段从 cached_len 开始、到 device_len - 1 结束
        seg = positions[offset: offset + r.extend_len]
        assert seg[0] == r.cached_len and seg[-1] == r.device_len - 1
        offset += r.extend_len


# ---------------------------------------------------------------- Context

def test_context_batch_only_inside_forward_batch():
    ctx = Context(page_size=4)
    batch = Batch(reqs=[make_req(3, 1)], phase="prefill")
    with pytest.raises(AssertionError, match="forward_batch"):
        ctx.batch
    with ctx.forward_batch(batch) as b:
        assert ctx.batch is batch and b is batch
    with pytest.raises(AssertionError):
        ctx.batch


def test_context_refuses_nesting_and_keeps_outer_batch():
    ctx = Context(page_size=1)
    outer = Batch(reqs=[make_req(3, 1)], phase="prefill")
    inner = Batch(reqs=[make_req(2, 1)], phase="decode")
    with ctx.forward_batch(outer):
        with pytest.raises(AssertionError, match="嵌套"):
            with ctx.forward_batch(inner):
                pass
        assert ctx.batch is outer  # 被拒绝的内层不会把外层清掉
    with pytest.raises(AssertionError):
        ctx.batch


def test_context_clears_batch_after_exception():
    ctx = Context(page_size=1)
    batch = Batch(reqs=[make_req(3, 1)], phase="prefill")
    with pytest.raises(ZeroDivisionError):
        with ctx.forward_batch(batch):
            1 / 0
    with pytest.raises(AssertionError):
        ctx.batch
    with ctx.forward_batch(batch):  # 之后还能正常使用
        assert ctx.batch is batch


def test_context_fields():
    ctx = Context(4)
    assert ctx.page_size == 4 and repr(ctx) == "Context(page_size=4, batch=None)"
    with pytest.raises(AttributeError, match="attn_backend"):
        ctx.attn_backend  # Engine 装上之前没有
    ctx.attn_backend = "backend"
    assert ctx.attn_backend == "backend"
    with pytest.raises(TypeError):
        Context(4, "backend")  # 只有 page_size 是构造参数


def test_global_ctx():
    set_global_ctx(None)
    with pytest.raises(AssertionError, match="set_global_ctx"):
        get_global_ctx()
    a, b = Context(1), Context(2)
    set_global_ctx(a)
    assert get_global_ctx() is a
    set_global_ctx(b)  # 新的 Engine 替换旧的
    assert get_global_ctx() is b
    set_global_ctx(None)


# ---------------------------------------------------------------- utils：整数工具

def test_div_even_random():
    rng = random.Random(1)
    for _ in range(200):
        b, q = rng.randint(1, 64), rng.randint(0, 64)
        assert div_even(b * q, b) == q
        if b > 1:
            with pytest.raises(ValueError, match="整除"):
                div_even(b * q + rng.randint(1, b - 1), b)


def test_div_even_replication_for_kv_heads():
    assert div_even(8, 16, allow_replicate=True) == 1  # Qwen3-0.6B 的 8 个 KV 头，TP=16
    assert div_even(3, 3, allow_replicate=True) == 1
    assert div_even(16, 2, allow_replicate=True) == 8  # 够分时和普通整除一样
    with pytest.raises(ValueError, match="复制"):
        div_even(6, 16, allow_replicate=True)
    with pytest.raises(ValueError):
        div_even(8, 16)  # 不允许复制时，8 不能切成 16 份
    with pytest.raises(ValueError):
        div_even(12, 8, allow_replicate=True)  # a > b 时仍然要求整除
    with pytest.raises(ValueError):
        div_even(4, 0)


def test_div_ceil_and_align_random():
    rng = random.Random(2)
    for _ in range(200):
        a, b = rng.randint(0, 10_000), rng.randint(1, 300)
        assert div_ceil(a, b) == math.ceil(a / b)
        assert align_ceil(a, b) % b == 0 and 0 <= align_ceil(a, b) - a < b
    with pytest.raises(ValueError):
        div_ceil(3, 0)


# ---------------------------------------------------------------- utils：设备与 dtype

def test_is_cuda_works_without_gpu():
    assert is_cuda("cuda") and is_cuda("cuda:3") and is_cuda(torch.device("cuda", 1))
    assert not is_cuda("cpu") and not is_cuda(torch.device("cpu"))


def test_device_of():
    assert device_of(0, "cpu") == torch.device("cpu")
    assert device_of(3, "cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="设备类型"):
        device_of(0, "tpu")
    if torch.cuda.is_available():
        assert device_of(0) == torch.device("cuda", 0)
    else:
        assert device_of(0) == torch.device("cpu")
        with pytest.raises(RuntimeError, match="CUDA"):
            device_of(0, "cuda")


def test_to_device_on_cpu_keeps_values_and_dtype():
    t = to_device([3, 1, 2], torch.int32, "cpu")
    assert t.dtype == torch.int32 and t.device.type == "cpu" and t.tolist() == [3, 1, 2]
    host = torch.tensor([[1, 2], [3, 4]], dtype=torch.int32)
    assert to_device(host, torch.int32, torch.device("cpu")) is host  # CPU 上不多拷一份
    assert to_device(host, torch.int64, "cpu").dtype == torch.int64


@pytest.mark.skipif(not torch.cuda.is_available(), reason="没有 CUDA：锁页内存 + non_blocking 只在 GPU 上走")
def test_to_device_on_cuda_does_not_sync():
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # 任何让 CPU 等 GPU 的操作都会抛错
    try:
        t = to_device(list(range(1000)), torch.int64, "cuda")
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert t.is_cuda and t.cpu().tolist() == list(range(1000))


def test_torch_dtype_restores_default():
    old = torch.get_default_dtype()
    with torch_dtype(torch.bfloat16):
        assert torch.empty(2).dtype == torch.bfloat16
    assert torch.get_default_dtype() == old
    with pytest.raises(KeyError):
        with torch_dtype(torch.float16):
            raise KeyError("出错也要恢复")
    assert torch.get_default_dtype() == old


# ---------------------------------------------------------------- env

@pytest.mark.parametrize("text, value", [(None, "INFO"), ("", "INFO"), ("  ", "INFO"),
                                         ("debug", "DEBUG"), (" Warning ", "WARNING")])
def test_env_log_level(monkeypatch, text, value):
    if text is None:
        monkeypatch.delenv("MINISGL_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("MINISGL_LOG_LEVEL", text)
    assert ENV.LOG_LEVEL == value


def test_env_reads_current_value(monkeypatch):
    monkeypatch.setenv("MINISGL_LOG_LEVEL", "error")
    assert ENV.LOG_LEVEL == "ERROR"
    monkeypatch.setenv("MINISGL_LOG_LEVEL", "debug")  # 改了环境变量，马上读到新值
    assert ENV.LOG_LEVEL == "DEBUG"


@pytest.mark.parametrize("text", ["LOUD", "1", "info,debug"])
def test_env_bad_value_gives_clear_error(monkeypatch, text):
    monkeypatch.setenv("MINISGL_LOG_LEVEL", text)
    with pytest.raises(EnvError) as info:
        ENV.LOG_LEVEL
    message = str(info.value)
    assert "MINISGL_LOG_LEVEL" in message and repr(text) in message and "应为" in message
    assert isinstance(info.value, ValueError)


# ---------------------------------------------------------------- logger

def _capture(logger) -> io.StringIO:
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(logger.logger.handlers[0].formatter)
    logger.logger.handlers = [handler]
    return buf


def test_logger_rank_prefix_and_rank0(monkeypatch):
    monkeypatch.setenv("MINISGL_LOG_LEVEL", "INFO")
    logger = init_logger("minisgl.test_ch01")
    buf = _capture(logger)
    try:
        logger.info("没有 rank")
        set_log_rank(1)
        logger.info("来自 rank 1")
        logger.info_rank0("rank 1 不该说这句")
        set_log_rank(0)
        logger.info_rank0("rank 0 说一次")
        logger.debug("级别不够，不输出")
    finally:
        set_log_rank(None)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3
    assert "rank" not in lines[0].split("]")[0]
    assert lines[0].endswith("] INFO minisgl.test_ch01: 没有 rank")
    assert "|rank 1]" in lines[1] and lines[1].endswith("来自 rank 1")
    assert "|rank 0]" in lines[2] and lines[2].endswith("rank 0 说一次")


def test_logger_level_from_env(monkeypatch):
    monkeypatch.setenv("MINISGL_LOG_LEVEL", "warning")
    logger = init_logger("minisgl.test_ch01_level")
    assert logger.logger.level == logging.WARNING
    assert len(init_logger("minisgl.test_ch01_level").logger.handlers) == 1  # 不重复加 handler
    monkeypatch.setenv("MINISGL_LOG_LEVEL", "chatty")
    with pytest.raises(EnvError, match="MINISGL_LOG_LEVEL"):
        init_logger("minisgl.test_ch01_level")


# ---------------------------------------------------------------- Registry


def test_registry_looks_up_by_name_and_lists_the_choices_when_wrong():
    from minisgl.utils import Registry

    table = Registry[type]("小工具")
    assert table.register("a")(int) is int  # 装饰器原样返回被登记的东西
    table.register("b")(str)
    assert table["a"] is int and table["b"] is str
    assert list(table) == ["a", "b"] and "a" in table and "c" not in table and len(table) == 2
    with pytest.raises(ValueError, match=r"不支持的小工具 'c'，可选：'a'、'b'"):
        table["c"]
    with pytest.raises(AssertionError, match="登记了两次"):
        table.register("a")(float)
    del table["a"]
    assert list(table) == ["b"]
