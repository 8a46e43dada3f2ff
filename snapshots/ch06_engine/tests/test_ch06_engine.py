"""第 6 章的测试：采样器的每条规则，以及 Engine 批量生成与 Hugging Face 逐 token 一致。"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from minisgl.core import Batch, Req, SamplingParams, get_global_ctx
from minisgl.distributed import get_tp_info
from minisgl.engine import Engine, EngineConfig, ForwardOutput, Sampler, logprobs_per_req
from minisgl.engine import engine as engine_module
from minisgl.kvcache import OutOfPagesError
from minisgl.layers import BaseOP

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from ch06_engine import MiniScheduler, generate  # noqa: E402  本章 main 里的迷你调度器

from minibook.hf import encode, hf_greedy  # noqa: E402
from minibook.models import smollm2, tiny_qwen3  # noqa: E402

VOCAB = 50


def fake_batch(params: list[SamplingParams]) -> Batch:
    reqs = [Req(input_ids=torch.tensor([1, 2], dtype=torch.int32), table_idx=i, cached_len=0,
                output_len=p.max_tokens, uid=i, sampling_params=p, cache_handle=None)
            for i, p in enumerate(params)]
    return Batch(reqs, "decode")


def draw(sampler: Sampler, logits: torch.Tensor, params: list[SamplingParams], n: int) -> torch.Tensor:
    """同一批采样 n 次，返回 [n, B]。"""
    args = sampler.prepare(fake_batch(params))
    return torch.stack([sampler.sample(logits, args) for _ in range(n)])


# ---------------------------------------------------------------- 采样器


def test_all_greedy_batch_is_argmax_and_needs_no_tensors():
    logits = torch.randn(5, VOCAB, generator=torch.Generator().manual_seed(0))
    sampler = Sampler(torch.device("cpu"), VOCAB)
    args = sampler.prepare(fake_batch([SamplingParams(), SamplingParams(top_k=1, temperature=2.0)] * 2
                                      + [SamplingParams()]))
    assert args.all_greedy and args.temperatures is None
    out = sampler.sample(logits, args)
    assert out.dtype == torch.int32 and out.tolist() == logits.argmax(-1).tolist()


def test_greedy_rows_stay_argmax_in_a_mixed_batch():
    logits = torch.randn(4, VOCAB, generator=torch.Generator().manual_seed(1))
    params = [SamplingParams(temperature=1.5), SamplingParams(), SamplingParams(top_k=1, temperature=1.0),
              SamplingParams(temperature=1.5, top_p=0.5)]
    samples = draw(Sampler(torch.device("cpu"), VOCAB), logits, params, 200)
    argmax = logits.argmax(-1)
    assert (samples[:, 1] == argmax[1]).all() and (samples[:, 2] == argmax[2]).all()
    assert len(set(samples[:, 0].tolist())) > 5  # 温度 1.5 的行真的在采样


@pytest.mark.parametrize("k", [1, 3, 10])
def test_top_k_only_samples_from_the_k_largest(k):
    logits = torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(k))
    params = [SamplingParams(temperature=3.0, top_k=k)] * 3  # 高温：不限制的话几乎什么都会抽到
    samples = draw(Sampler(torch.device("cpu"), VOCAB), logits, params, 400)
    for row in range(3):
        allowed = set(logits[row].topk(k).indices.tolist())
        seen = set(samples[:, row].tolist())
        assert seen <= allowed
        assert len(seen) == min(k, len(allowed))  # 400 次高温采样，k 个都该出现


@pytest.mark.parametrize("p", [0.3, 0.6, 0.95])
def test_top_p_keeps_the_smallest_nucleus(p):
    logits = torch.randn(2, VOCAB, generator=torch.Generator().manual_seed(int(p * 100))) * 2
    params = [SamplingParams(temperature=1.0, top_p=p)] * 2
    samples = draw(Sampler(torch.device("cpu"), VOCAB), logits, params, 600)
    for row in range(2):
        probs, order = logits[row].softmax(-1).sort(descending=True)
        # 参照：逐个加入，直到累计概率达到 p（第一名总在里面）
        nucleus, total = [], 0.0
        for prob, token in zip(probs.tolist(), order.tolist()):
            if total >= p:
                break
            nucleus.append(token)
            total += prob
        assert set(samples[:, row].tolist()) <= set(nucleus)
        assert samples[:, row].eq(order[0]).any()


def test_temperature_frequencies_follow_the_softmax():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -3.0]])
    temperature, n = 0.7, 4000
    samples = draw(Sampler(torch.device("cpu"), 5, seed=3), logits,
                   [SamplingParams(temperature=temperature)], n)[:, 0]
    expected = (logits[0] / temperature).softmax(-1) * n
    observed = torch.bincount(samples.long(), minlength=5).float()
    chi2 = (((observed - expected) ** 2) / expected).sum().item()
    assert chi2 < 20.0, (observed.tolist(), expected.tolist())  # 4 个自由度，p≈0.0005 的界


def test_same_seed_same_samples_other_seed_differs():
    logits = torch.randn(4, VOCAB, generator=torch.Generator().manual_seed(7))
    params = [SamplingParams(temperature=1.0)] * 4
    a = draw(Sampler(torch.device("cpu"), VOCAB, seed=11), logits, params, 30)
    b = draw(Sampler(torch.device("cpu"), VOCAB, seed=11), logits, params, 30)
    c = draw(Sampler(torch.device("cpu"), VOCAB, seed=12), logits, params, 30)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_tiny_temperature_is_greedy_not_nan():
    """1e-40 这样的温度让 logits / t 溢出成 inf、softmax 成 NaN：低于阈值按贪心处理。"""
    logits = torch.randn(2, VOCAB, generator=torch.Generator().manual_seed(2))
    params = [SamplingParams(temperature=1e-40), SamplingParams(temperature=1.0)]
    samples = draw(Sampler(torch.device("cpu"), VOCAB), logits, params, 50)
    assert (samples[:, 0] == logits[0].argmax()).all(), samples[:, 0].tolist()


def seeded_run(sampler: Sampler, logits: torch.Tensor, params: list[SamplingParams],
               steps: int) -> torch.Tensor:
    """像 decode 一样跑 steps 步（每步请求前进一个 token），返回 [steps, B]。"""
    batch = fake_batch(params)
    out = []
    for _ in range(steps):
        out.append(sampler.sample(logits[: len(params)], sampler.prepare(batch)))
        for req in batch.reqs:
            req.complete_one()
    return torch.stack(out)


def test_seeded_request_ignores_its_batch_mates_and_the_sampler_seed():
    logits = torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(5))
    row = logits[1:2].expand(3, VOCAB)  # 三行同样的 logits：只有随机数不同
    mine = SamplingParams(temperature=1.0, seed=1234)
    alone = seeded_run(Sampler(torch.device("cpu"), VOCAB, seed=0), row, [mine], 20)[:, 0]
    mates = [SamplingParams(temperature=1.0), mine, SamplingParams(temperature=0.5, seed=9)]
    crowded = seeded_run(Sampler(torch.device("cpu"), VOCAB, seed=77), row, mates, 20)
    assert torch.equal(crowded[:, 1], alone)  # 换了批、换了采样器的种子：同样的 token
    # 对照：不带 seed 的请求在两种情况下不一样（所以上面相等不是巧合）
    plain = [SamplingParams(temperature=1.0)]
    a = seeded_run(Sampler(torch.device("cpu"), VOCAB, seed=0), row, plain, 20)[:, 0]
    b = seeded_run(Sampler(torch.device("cpu"), VOCAB, seed=77), row, plain, 20)[:, 0]
    assert not torch.equal(a, b)
    other = seeded_run(Sampler(torch.device("cpu"), VOCAB), row, [SamplingParams(
        temperature=1.0, seed=1235)], 20)[:, 0]
    assert not torch.equal(other, alone)  # seed 差 1 就是另一串随机数
    assert len(set(alone.tolist())) > 3  # 真的在采样，不是每步同一个 token


def reference_penalized(logits: torch.Tensor, history: list[int], presence: float,
                        frequency: float) -> torch.Tensor:
    """OpenAI 文档里的公式，逐个 token 写：出现过的减 presence，再按次数减 frequency。"""
    out = logits.clone()
    for token in set(history):
        count = history.count(token)
        out[token] -= presence + frequency * count
    return out


@pytest.mark.parametrize("case", range(4))
def test_penalties_match_a_straightforward_reference(case):
    gen = torch.Generator().manual_seed(100 + case)
    vocab, steps = 12, 15
    presence = [float(x) for x in torch.empty(3).uniform_(-2, 2, generator=gen)]
    frequency = [float(x) for x in torch.empty(3).uniform_(-2, 2, generator=gen)]
    params = [SamplingParams(presence_penalty=presence[0], frequency_penalty=frequency[0]),
              SamplingParams(),  # 同批里不带惩罚的行：照旧 argmax
              SamplingParams(presence_penalty=presence[2], frequency_penalty=frequency[2])]
    sampler = Sampler(torch.device("cpu"), vocab, max_running_req=4)
    batch = fake_batch(params)
    history: list[list[int]] = [[], [], []]
    changed = False
    for _ in range(steps):
        logits = torch.randn(3, vocab, generator=gen)
        tokens = sampler.sample(logits, sampler.prepare(batch)).tolist()
        for i in range(3):
            p = params[i]
            ref = reference_penalized(logits[i], history[i], p.presence_penalty,
                                      p.frequency_penalty)
            assert tokens[i] == int(ref.argmax()), (i, history[i])
            changed |= tokens[i] != int(logits[i].argmax())
            history[i].append(tokens[i])
        for req in batch.reqs:
            req.complete_one()
    assert changed, "惩罚一次都没改变结果：这个用例测不出东西"


def test_a_reused_row_starts_with_fresh_counts():
    """页表的行会交给下一个请求：它的第一个 token 之前，上一个请求的计数要清掉。"""
    vocab = 8
    logits = torch.zeros(1, vocab)
    logits[0, 3] = 1.0  # 不惩罚时总是 3
    sampler = Sampler(torch.device("cpu"), vocab, max_running_req=2)
    p = SamplingParams(frequency_penalty=2.0)
    first = seeded_run(sampler, logits, [p], 3)[:, 0].tolist()
    assert first[0] == 3 and first[1] != 3  # 生成过的 3 被惩罚
    again = seeded_run(sampler, logits, [p], 1)[:, 0].tolist()  # 同一行（0 号）的新请求
    assert again == [3]


def test_logprobs_are_the_raw_log_softmax_and_top_k():
    logits = torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(8)) * 3
    params = [SamplingParams(temperature=0.7, logprobs=True, top_logprobs=4, seed=1,
                             frequency_penalty=1.0),
              SamplingParams(),  # 没要 logprobs
              SamplingParams(logprobs=True)]  # 只要采样出的那个，不要候选
    sampler = Sampler(torch.device("cpu"), VOCAB)
    batch = fake_batch(params)
    args = sampler.prepare(batch)
    tokens = sampler.sample(logits, args).tolist()
    per_req = logprobs_per_req(args.logprobs, batch.reqs)
    ref = logits.log_softmax(-1)  # 温度、惩罚之前的原始 logits
    assert per_req[1] is None
    for i in (0, 2):
        assert per_req[i].logprob == pytest.approx(float(ref[i, tokens[i]]), abs=1e-6)
    values, ids = ref[0].topk(4)
    assert per_req[0].top_ids == ids.tolist()
    assert per_req[0].top_logprobs == pytest.approx(values.tolist(), abs=1e-6)
    assert per_req[2].top_ids == [] and per_req[2].top_logprobs == []
    assert sampler.prepare(fake_batch([SamplingParams()])).logprobs is None


# ---------------------------------------------------------------- Engine


@pytest.fixture
def clean_global_state():
    yield
    assert get_tp_info().size == 1


def make_engine(path, **overrides) -> Engine:
    options = dict(model_path=path, max_running_req=6, num_page_override=48, page_size=4,
                   max_seq_len_override=48)
    options.update(overrides)
    return Engine(EngineConfig(**options))


PROMPTS = ["The capital of France is", "Hello", "def add(a, b):\n    return", "1, 2, 3, 4,"]


@pytest.mark.parametrize("model", ["smollm2", "tiny_qwen3"])
@pytest.mark.parametrize("page_size", [1, 4])
def test_batched_greedy_equals_huggingface(model, page_size, clean_global_state):
    path = {"smollm2": smollm2, "tiny_qwen3": tiny_qwen3}[model]()
    engine = make_engine(path, page_size=page_size, num_page_override=192 // page_size)
    prompts = [encode(path, t) for t in PROMPTS]
    lengths = [7, 3, 5, 1]
    sched = MiniScheduler(engine)
    outputs, sizes = sched.generate(prompts, [SamplingParams(max_tokens=n) for n in lengths])
    assert sizes == [4, 3, 3, 2, 2, 1, 1]  # 请求按 max_tokens 陆续结束，批随之变小
    for prompt, out, n in zip(prompts, outputs, lengths):
        assert out == hf_greedy(path, prompt, n)
    assert sched.allocator.num_free_pages == engine.num_pages  # 页全部还回来了
    assert sched.table.available_size == 6  # 页表的行也是
    engine.shutdown()


def test_engine_logprobs_equal_huggingface_log_softmax(clean_global_state):
    """Engine 报出的 log 概率 = HF 同一段 token 的 logits 做 log_softmax（float32，容差 1e-3）。"""
    from minibook.hf import hf_logits

    path = smollm2()
    engine = make_engine(path)
    steps = []
    launch = engine.forward_batch

    def recording(batch, args):  # 记下每一步批里的请求和 Engine 的输出
        out = launch(batch, args)
        steps.append(([(r.uid, r.device_len) for r in batch.reqs], out))  # 长度之后还会变
        return out

    engine.forward_batch = recording
    prompts = [encode(path, t) for t in PROMPTS[:2]]
    params = [SamplingParams(temperature=0.9, seed=4, logprobs=True, top_logprobs=5, max_tokens=5),
              SamplingParams(max_tokens=3)]  # 同批的请求没要 logprobs
    outputs, _ = MiniScheduler(engine).generate(prompts, params)
    engine.shutdown()

    def engine_req(uid):  # logprobs_per_req 只看请求的采样参数
        return fake_batch([params[uid]]).reqs[0]

    seq = prompts[0] + outputs[0]
    ref = hf_logits(path, seq).log_softmax(-1)
    checked = 0
    for reqs, out in steps:
        uids = [uid for uid, _ in reqs]
        per_req = logprobs_per_req(out.logprobs, [engine_req(uid) for uid in uids])
        for (uid, device_len), lp in zip(reqs, per_req):
            if uid != 0:
                assert lp is None
                continue
            pos = device_len - 2  # complete_one 之后：新 token 在 device_len - 1，它的 logits 在前一位
            token = seq[pos + 1]
            assert lp.logprob == pytest.approx(float(ref[pos, token]), abs=1e-3)
            values, ids = ref[pos].topk(5)
            assert lp.top_ids == ids.tolist()
            assert lp.top_logprobs == pytest.approx(values.tolist(), abs=1e-3)
            checked += 1
    assert checked == 5


class LateCopy:
    """模拟 GPU 上的异步拷回：synchronize() 之前，CPU 上的副本还是垃圾。"""

    def __init__(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        self.src, self.dst = src, dst

    def synchronize(self) -> None:
        self.dst.copy_(self.src)


def test_generate_waits_for_the_copy_before_reading_tokens(clean_global_state):
    path = tiny_qwen3()
    engine = make_engine(path)
    forward = engine.forward_batch

    def late_forward(batch, args):
        out = forward(batch, args)
        garbage = torch.full_like(out.next_tokens, -1)
        return ForwardOutput(out.next_tokens, garbage, LateCopy(out.next_tokens, garbage))

    engine.forward_batch = late_forward  # type: ignore[method-assign]
    prompts = [encode(path, t) for t in PROMPTS[:2]]
    outputs, _ = generate(engine, prompts, [SamplingParams(max_tokens=3)] * 2)
    assert outputs == [hf_greedy(path, p, 3) for p in prompts]
    engine.shutdown()


def test_forward_batch_does_the_bookkeeping_at_launch(clean_global_state):
    path = tiny_qwen3()
    engine = make_engine(path)
    sched = MiniScheduler(engine)
    req = sched.add([1, 2, 3, 4, 5], SamplingParams(max_tokens=3), uid=0)
    batch = sched.prepare_batch([req], "prefill")
    out = engine.forward_batch(batch, engine.sampler.prepare(batch))
    # Engine 前进了记账：5 个 token 进了 KV 池，新 token 占住位置 5；CPU 上的 token 还没追加
    assert (req.cached_len, req.device_len, len(req.input_ids)) == (5, 6, 5)
    assert out.next_tokens.shape == (1,)
    engine.shutdown()


class FakeEvent:
    """记下 record 时传进来的流。"""

    def record(self, stream=None) -> None:
        self.stream = stream


def test_copy_done_is_recorded_on_the_engines_stream(monkeypatch, clean_global_state):
    engine = make_engine(tiny_qwen3())
    sched = MiniScheduler(engine)
    req = sched.add([1, 2, 3], SamplingParams(max_tokens=2), uid=0)
    batch = sched.prepare_batch([req], "prefill")
    # 假装这是 cuda:1 上的 Engine：当前流就是它的流，另一块卡的流是别的对象
    engine.stream = own_stream = object()
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: own_stream)
    out = engine.forward_batch(batch, engine.sampler.prepare(batch))
    assert isinstance(out.copy_done, FakeEvent) and out.copy_done.stream is own_stream
    engine.stream = None
    engine.shutdown()


def test_pool_sized_by_the_memory_budget_not_by_the_page_table(monkeypatch):
    path = tiny_qwen3()
    monkeypatch.setattr(engine_module, "_free_memory", lambda device: 64 * 2**20)
    engine = make_engine(path, num_page_override=None, memory_ratio=0.25)
    c = engine.model_config
    per_page = 2 * c.num_layers * c.num_kv_heads * c.head_dim * 4 * 4  # float32，page_size=4
    assert engine.kv_bytes_per_page() == per_page
    # 16 MiB 的预算全给 KV 池，不再被 "6 行 × 每行 12 页 = 72 页" 封顶
    assert engine.num_pages == 16 * 2**20 // per_page > 6 * 48 // 4
    assert engine.max_seq_len == 48 and engine.page_table.shape == (7, 48)
    engine.shutdown()


def test_max_seq_len_is_capped_by_the_pool():
    engine = make_engine(tiny_qwen3(), num_page_override=5, page_size=4)  # 池子只有 20 个 token
    assert engine.max_seq_len == 20 and engine.page_table.shape == (7, 20)
    with pytest.raises(ValueError):  # 比整个池子还长的请求，在进门时就被拒绝
        MiniScheduler(engine).add(list(range(15)), SamplingParams(max_tokens=6), uid=0)
    engine.shutdown()


def test_padding_row_points_at_a_dummy_page_nobody_owns():
    engine = make_engine(tiny_qwen3(), num_page_override=6, page_size=4)
    assert engine.dummy_page == 6
    assert engine.kv_cache.num_slots == (6 + 1) * 4  # 池子多一页
    assert (engine.page_table[-1] == 6 * 4).all()  # 占位行整行指向占位页
    allocator = MiniScheduler(engine).allocator
    assert sorted(allocator.alloc_pages(6)) == list(range(6))  # 能分出去的页里没有它
    engine.shutdown()


def test_a_padded_request_writes_only_into_the_dummy_page():
    """补齐批大小的占位请求（CUDA 图重放时会有）把 K/V 写进占位页，不碰真实请求的槽位。"""
    engine = make_engine(tiny_qwen3())
    sched = MiniScheduler(engine)
    req = sched.add([1, 2, 3, 4, 5], SamplingParams(max_tokens=3), uid=0)
    sched.step([req], "prefill")
    pad_row = engine.config.max_running_req  # 页表的最后一行：占位行
    pad = Req(input_ids=torch.tensor([0], dtype=torch.int32), table_idx=pad_row, cached_len=0,
              output_len=1, uid=-1, sampling_params=SamplingParams(), cache_handle=None)
    batch = Batch([req], "decode")
    batch.padded_reqs = [req, pad]
    padding_slot = engine.page_table[pad.table_idx, :1]
    batch.out_loc = torch.cat([sched.allocator.alloc_slots([req]), padding_slot])
    pool = sched.table.token_pool
    batch.input_ids = torch.cat([pool[req.table_idx, 5:6], pool[pad.table_idx, :1]]).long()
    batch.positions = torch.tensor([5, 0])
    engine.attn_backend.prepare_metadata(batch)
    before = engine.kv_cache.kv_buffer.clone().view(torch.int32)  # 按位比较：未写过的槽位可能是 nan
    engine.forward_batch(batch, engine.sampler.prepare(batch))
    changed = (engine.kv_cache.kv_buffer.view(torch.int32) != before).any(-1).any(-1).any(1).any(0)
    assert changed.nonzero().flatten().tolist() == [5, engine.dummy_page * 4]
    engine.shutdown()


def test_a_batch_that_does_not_fit_changes_nothing():
    engine = make_engine(tiny_qwen3(), num_page_override=3, page_size=4)  # 3 页 = 12 个 token
    sched = MiniScheduler(engine)
    reqs = [sched.add(list(range(10, 18)), SamplingParams(max_tokens=2), uid=i) for i in range(2)]
    table_before = engine.page_table.clone()
    with pytest.raises(OutOfPagesError):  # 每个 8 token 的提示要 2 页，一共 4 页
        sched.prepare_batch(reqs, "prefill")
    assert sched.allocator.num_free_pages == 3  # 失败的分配什么都没拿走
    assert torch.equal(engine.page_table, table_before)
    assert [(r.cached_len, r.device_len) for r in reqs] == [(0, 8), (0, 8)]
    out = sched.step(reqs[:1], "prefill")  # 单独一个请求放得下，照常运行
    assert len(out) == 1 and sched.allocator.num_free_pages == 1
    engine.shutdown()


def run_gpu_smoke(*args: str, hide_cuda: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if hide_cuda:
        env["CUDA_VISIBLE_DEVICES"] = ""  # 让有 GPU 的机器也走"没有 CUDA"的分支
    root = Path(__file__).resolve().parents[1]
    return subprocess.run([sys.executable, "examples/gpu_smoke.py", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)


def test_gpu_smoke_skips_cleanly_without_cuda():
    result = run_gpu_smoke(hide_cuda=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "没有可用的 CUDA" in result.stdout and "跳过" in result.stdout


def test_gpu_smoke_logic_passes_on_cpu():
    """--cpu 走一遍脚本自身（生成、与 HF 比较、还页），CUDA 的检查不做。有 GPU 时真的跑一遍。"""
    result = run_gpu_smoke() if torch.cuda.is_available() else run_gpu_smoke("--cpu")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "全部通过" in result.stdout and "✗" not in result.stdout


def test_shutdown_clears_the_global_context():
    engine = make_engine(tiny_qwen3())
    assert get_global_ctx() is engine.ctx
    engine.shutdown()
    with pytest.raises(AssertionError):
        get_global_ctx()


def test_one_engine_per_process():
    """全局上下文一个进程只有一份：第二个 Engine 报错，而不是悄悄换掉第一个的上下文。"""
    first = make_engine(tiny_qwen3())
    with pytest.raises(RuntimeError, match="shutdown"):
        make_engine(tiny_qwen3())
    assert get_global_ctx() is first.ctx  # 第一个的上下文没被动过
    first.shutdown()
    second = make_engine(tiny_qwen3())  # 前一个 shutdown 之后就能建
    first.shutdown()  # 再 shutdown 一次旧的：什么都不做，不会清掉第二个的上下文
    assert get_global_ctx() is second.ctx
    second.shutdown()


class FakeStream:
    """假的 CUDA 流：记下它建在哪块设备上。"""

    def __init__(self, device=None) -> None:
        self.device = device


def test_a_cuda_engine_makes_its_own_stream_current_before_building_anything(
        monkeypatch, clean_global_state):
    # 没有 GPU 也能验这条路：让 Engine 以为设备是 CUDA，记下它按什么顺序调用 torch.cuda
    calls = []
    monkeypatch.setattr(engine_module, "is_cuda", lambda device: True)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.append(("set_device", device)))

    def make_stream(device=None):
        calls.append(("Stream", device))
        return FakeStream(device)

    monkeypatch.setattr(torch.cuda, "Stream", make_stream)
    monkeypatch.setattr(torch.cuda, "set_stream", lambda stream: calls.append(("set_stream", stream)))
    load_model = Engine._load_model
    monkeypatch.setattr(Engine, "_load_model",
                        lambda self: calls.append(("load_model",)) or load_model(self))
    engine = make_engine(tiny_qwen3(), device="cpu")
    try:
        # 先定设备，再在这块设备上建流、设成当前流，最后才建模型、池子：它们都排在这条流上
        assert calls == [("set_device", engine.device), ("Stream", engine.device),
                         ("set_stream", engine.stream), ("load_model",)]
        assert isinstance(engine.stream, FakeStream)
    finally:
        engine.stream = None
        engine.shutdown()


def test_the_engine_moves_the_rope_tables_when_it_loads_the_model(monkeypatch, clean_global_state):
    """RoPE 表不是权重，不随 load_state_dict 上卡：Engine 加载完权重就把它们搬到自己的设备上。
    等到第一步前向再搬，GPU 上那一步就多一次隐藏的同步（gpu_smoke 在 H200 上数到过 2 次）。"""
    from minisgl.layers import rope_tables_to

    moved = []
    monkeypatch.setattr(engine_module, "rope_tables_to",
                        lambda device: moved.append(device) or rope_tables_to(device))
    load_state_dict = BaseOP.load_state_dict
    monkeypatch.setattr(BaseOP, "load_state_dict",
                        lambda self, *a, **kw: moved.append("weights") or load_state_dict(self, *a, **kw))
    engine = make_engine(tiny_qwen3(), device="cpu")
    try:
        assert moved == ["weights", engine.device]  # 权重之后、任何前向之前，只搬一次
        rope = engine.model.model.layers[0].self_attn._attn._rotary
        assert rope._cos.device == rope._sin.device == engine.device
    finally:
        engine.shutdown()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="需要 CUDA")
def test_the_engine_runs_on_its_own_current_stream():
    engine = make_engine(tiny_qwen3(), device="cuda")
    assert engine.stream == torch.cuda.current_stream()
    assert engine.stream != torch.cuda.default_stream()  # 默认流和别的流隐式同步
    engine.shutdown()


@pytest.mark.parametrize("bad", [dict(memory_ratio=0.0), dict(memory_ratio=1.5),
                                 dict(max_running_req=0), dict(num_page_override=0),
                                 dict(page_size=0), dict(max_seq_len_override=0)])
def test_engine_config_rejects_bad_values(bad):
    with pytest.raises(ValueError):
        EngineConfig(model_path=tiny_qwen3(), **bad)
