"""第 6 章的测试：采样器的每条规则，以及 Engine 批量生成与 Hugging Face 逐 token 一致。"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

from minisgl.core import Batch, Req, SamplingParams, get_global_ctx
from minisgl.distributed import get_tp_info
from minisgl.engine import Engine, EngineConfig, ForwardOutput, Sampler
from minisgl.kvcache import OutOfPagesError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from ch06_engine import generate  # noqa: E402  本章 main 里的迷你调度器

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
    outputs, sizes = generate(engine, prompts, [SamplingParams(max_tokens=n) for n in lengths])
    assert sizes == [4, 3, 3, 2, 2, 1, 1]  # 请求按 max_tokens 陆续结束，批随之变小
    for prompt, out, n in zip(prompts, outputs, lengths):
        assert out == hf_greedy(path, prompt, n)
    assert engine.page_allocator.num_free_pages == engine.num_pages
    engine.shutdown()


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


def test_memory_budget_sizes_the_pool_and_is_capped_by_the_page_table():
    path = tiny_qwen3()
    engine = make_engine(path, num_page_override=None, memory_ratio=0.05)
    c = engine.model_config
    per_page = 2 * c.num_layers * c.num_kv_heads * c.head_dim * 4 * 4  # float32，page_size=4
    assert engine.kv_bytes_per_page() == per_page
    cap = 6 * math.ceil(48 / 4)  # 6 行 × 每行最多 12 页
    assert 1 <= engine.num_pages <= cap
    assert engine.kv_cache.num_slots == engine.num_pages * 4
    engine.shutdown()


def test_running_out_of_pages_is_a_clear_error():
    path = tiny_qwen3()
    engine = make_engine(path, num_page_override=2, page_size=4)  # 只够 8 个 token
    prompt = encode(path, "This prompt is certainly longer than eight tokens, by quite a lot.")
    with pytest.raises(OutOfPagesError):
        generate(engine, [prompt], [SamplingParams(max_tokens=2)])
    assert engine.page_allocator.num_free_pages == 2  # 失败的分配什么都没拿走
    engine.shutdown()


def test_shutdown_clears_the_global_context():
    engine = make_engine(tiny_qwen3())
    assert get_global_ctx() is engine.ctx
    engine.shutdown()
    with pytest.raises(RuntimeError):
        get_global_ctx()


@pytest.mark.parametrize("bad", [dict(memory_ratio=0.0), dict(memory_ratio=1.5),
                                 dict(max_running_req=0), dict(num_page_override=0)])
def test_engine_config_rejects_bad_values(bad):
    with pytest.raises(ValueError):
        EngineConfig(model_path=tiny_qwen3(), **bad)
