"""第 10 章：分块 prefill。块大小怎么取、两块之间插不插 decode，贪心输出都和 HF 逐 token 相同；
只有一批的最后一个请求会被切开，它下一步回到队首，从不被采样、不回报、不进 decode。"""

from __future__ import annotations

import pytest
import torch

from minibook.hf import encode, hf_greedy
from minibook.models import smollm2, tiny_qwen3
import minisgl.env
from minisgl.core import Batch, SamplingParams
from minisgl.llm import LLM
from minisgl.scheduler import SchedulerConfig
from minisgl.scheduler.prefill import ChunkedReq

TEXTS = ["Chunked prefill splits a long prompt into pieces so that one step never computes more "
         "than a fixed number of tokens, and the rest waits for the next step.",
         "The capital of France is", "def add(a, b):", "Once upon a time,"]
MAX_TOKENS = [6, 5, 9, 3]


class TracingLLM(LLM):
    """记下每一批里每个请求：(uid, cached_len, device_len, 是不是 ChunkedReq)。"""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.trace: list[tuple[str, list[tuple[int, int, int, bool]]]] = []

    def _prepare_batch(self, batch: Batch):
        self.trace.append((batch.phase, [(r.uid, r.cached_len, r.device_len, isinstance(r, ChunkedReq))
                                         for r in batch.reqs]))
        return super()._prepare_batch(batch)


def small_llm(path, max_running_req: int = 4, **fields) -> TracingLLM:
    return TracingLLM(path, max_running_req=max_running_req, page_size=4, num_page_override=96,
                      max_seq_len_override=96, **fields)


def assert_all_freed(llm: LLM) -> None:
    """没有请求在跑：每一页要么空闲、要么只在前缀缓存里（可以逐出），行全部空着。"""
    llm.cache_manager.check_integrity()
    assert llm.cache_manager.available_size == llm.engine.num_pages
    assert llm.table_manager.available_size == llm.config.max_running_req


@pytest.mark.parametrize("between", [False, True], ids=["prefill_first", "decode_between"])
@pytest.mark.parametrize("budget", [1, 7, 64])
def test_greedy_matches_hf_for_every_chunk_size(budget, between):
    path = tiny_qwen3()
    prompts = [encode(path, t) for t in TEXTS]
    llm = small_llm(path, max_extend_tokens=budget, decode_between_chunks=between)
    outs = llm.generate(prompts, [SamplingParams(max_tokens=n, ignore_eos=True) for n in MAX_TOKENS])
    for prompt, out, n in zip(prompts, outs, MAX_TOKENS):
        assert out["token_ids"] == hf_greedy(path, prompt, n)
    chunked_steps = sum(any(c for *_, c in items) for _, items in llm.trace)
    assert chunked_steps >= (len(prompts[0]) - 1) // budget  # 长提示真的被切开了
    # 再来一次：提示的开头命中前缀缓存，分块从命中的地方接着切
    llm.trace.clear()
    again = [p + [42, 43] for p in prompts]
    outs = llm.generate(again, [SamplingParams(max_tokens=n, ignore_eos=True) for n in MAX_TOKENS])
    for prompt, out, n in zip(again, outs, MAX_TOKENS):
        assert out["token_ids"] == hf_greedy(path, prompt, n)
    first_chunk_start = llm.trace[0][1][0][1]
    assert first_chunk_start > 0 and first_chunk_start % 4 == 0  # 从命中的整页之后开始算
    assert_all_freed(llm)
    llm.shutdown()


def test_greedy_matches_hf_on_smollm2_with_chunks_of_7():
    path = smollm2()
    prompts = [encode(path, t) for t in TEXTS[:2]]
    llm = small_llm(path, max_extend_tokens=7)
    outs = llm.generate(prompts, [SamplingParams(max_tokens=5, ignore_eos=True)] * 2)
    assert [o["token_ids"] for o in outs] == [hf_greedy(path, p, 5) for p in prompts]
    assert_all_freed(llm)
    llm.shutdown()


def reference_plan(lens: list[int], budget: int) -> list[list[tuple[int, int, int]]]:
    """另一种想法算出的计划：所有提示首尾相接排成一条，每 budget 个 token 切一刀。"""
    stream = [(uid, pos) for uid, n in enumerate(lens) for pos in range(n)]
    steps = []
    for s in range(0, len(stream), budget):
        batch: list[tuple[int, int, int]] = []
        for uid, pos in stream[s: s + budget]:
            if batch and batch[-1][0] == uid:
                batch[-1] = (uid, batch[-1][1], pos + 1)
            else:
                batch.append((uid, pos, pos + 1))
        steps.append(batch)
    return steps


@pytest.mark.parametrize("budget", [3, 5, 16])
def test_only_the_last_request_is_chunked_and_it_comes_back_first(budget):
    path = tiny_qwen3()
    lens = [11, 2, 7, 1, 9]
    llm = small_llm(path, max_extend_tokens=budget, max_running_req=5)
    for uid, n in enumerate(lens):  # 一次全部排进队列，只看 prefill 怎么切；提示互不相同，不命中缓存
        llm.add_req(uid, torch.arange(100 * (uid + 1), 100 * (uid + 1) + n, dtype=torch.int32),
                    SamplingParams(max_tokens=2, ignore_eos=True))
    while llm.runnable:
        llm.step()
    prefills = [items for phase, items in llm.trace if phase == "prefill"]
    assert [[(u, s, e) for u, s, e, _ in items] for items in prefills] == reference_plan(lens, budget)
    for items in prefills:
        assert sum(e - s for _, s, e, _ in items) <= budget
        assert not any(chunked for *_, chunked in items[:-1])  # 只有最后一个可能被切开
        uid, _, end, chunked = items[-1]
        assert chunked == (end < lens[uid])
    assert_all_freed(llm)
    llm.shutdown()


def test_a_chunked_request_is_never_sampled_returned_or_decoded():
    path = tiny_qwen3()
    prompt = list(range(200, 230))
    llm = small_llm(path, max_extend_tokens=8)
    llm.add_req(0, torch.tensor(prompt, dtype=torch.int32), SamplingParams(max_tokens=3, ignore_eos=True))
    outputs = []
    for _ in range(3):  # 30 个 token、每步 8 个：前 3 步都只算了一块
        outputs += llm.step()
        pending = llm.prefill_manager.pending_list[0]
        chunk = pending.chunked_req
        assert isinstance(chunk, ChunkedReq) and not llm.decode_manager.runnable
        assert chunk.input_ids.tolist() == prompt[:chunk.cached_len]  # CPU 上没有多出 token
        # 丢掉的采样结果没有写进 token 池：提示原样在那里，下一块从这里取
        assert llm.token_pool[chunk.table_idx, :30].tolist() == prompt
    assert outputs == []
    with pytest.raises(AssertionError, match="不该有输出 token"):
        chunk.append_host(5)
    outputs = llm.step()  # 最后一块：这一步才有第一个输出 token
    assert [o.uid for o in outputs] == [0] and llm.decode_manager.runnable
    while llm.runnable:
        outputs += llm.step()
    assert [o.next_token for o in outputs] == hf_greedy(path, prompt, 3)
    llm.shutdown()


def test_partial_chunks_are_not_inserted_into_the_prefix_cache():
    path = tiny_qwen3()
    llm = small_llm(path, max_extend_tokens=8)  # 默认 cache_type="radix"
    prompt = list(range(500, 530))
    llm.add_req(0, torch.tensor(prompt, dtype=torch.int32), SamplingParams(max_tokens=3, ignore_eos=True))
    cached = []
    for _ in range(4):  # 3 块，然后最后 6 个 token
        llm.step()
        cached.append(llm.cache_manager.prefix_cache.size_info.total_size)
    # 分块期间什么都不插：队首被它占着，后面没有请求能被接纳，插进去也没人能用。
    # 最后一块算完，整段提示一起插入（只插整页：30 个 token、每页 4 个 → 28 个）
    assert cached == [0, 0, 0, 28]
    while llm.runnable:
        llm.step()
    assert_all_freed(llm)
    llm.shutdown()


def test_aborting_a_half_prefilled_request_returns_its_row_and_pages():
    path = tiny_qwen3()
    llm = small_llm(path, max_extend_tokens=8)
    llm.add_req(7, torch.arange(300, 340, dtype=torch.int32), SamplingParams(max_tokens=4))
    llm.step()
    llm.step()
    assert llm.cache_manager.allocator.num_free_pages < llm.engine.num_pages  # 两块占着页
    assert llm.abort_req(7)
    assert not llm.runnable
    assert_all_freed(llm)
    prompt = encode(path, TEXTS[1])  # 之后的请求照常
    out = llm.generate([prompt], SamplingParams(max_tokens=4, ignore_eos=True))
    assert out[0]["token_ids"] == hf_greedy(path, prompt, 4)
    llm.shutdown()


@pytest.mark.parametrize("between", [False, True])
def test_decode_between_chunks_is_the_only_difference_in_the_step_order(between):
    path = tiny_qwen3()
    llm = small_llm(path, max_extend_tokens=8, decode_between_chunks=between)
    for uid in (1, 2):
        llm.add_req(uid, torch.tensor([11, 12, 13], dtype=torch.int32),
                    SamplingParams(max_tokens=20, ignore_eos=True))
    llm.step()  # 两个短请求 prefill，之后在 decode
    llm.add_req(0, torch.arange(400, 432, dtype=torch.int32), SamplingParams(max_tokens=2))
    while llm.runnable:
        llm.step()
    order = "".join("P" if phase == "prefill" else "D" for phase, _ in llm.trace)
    # 32 个 token 每块 8 个：4 块。上游：块接着块，decode 等到最后；另一种：每两块之间 decode 一步
    assert order.startswith("PPDPDPDP" if between else "PPPPP"), order
    assert order.count("P") == 5
    llm.shutdown()


def test_smaller_chunks_lower_the_peak_memory_of_a_long_prefill():
    """SDPA 的 math 实现为每个头物化 [query × key] 的分数矩阵：块越小，峰值越低。"""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from ch10_experiments import prefill_peak
    from torch.nn.attention import SDPBackend

    small = prefill_peak(tiny_qwen3(), 512, 64, SDPBackend.MATH)
    whole = prefill_peak(tiny_qwen3(), 512, 512, SDPBackend.MATH)
    scores = 16 * 512 * 512 * 4  # 一次算完：16 个头 × 512 × 512 × 4 字节
    assert whole > scores and small < whole / 4, (whole, scores, small)


def test_decode_between_chunks_must_be_a_bool():
    with pytest.raises(ValueError, match="decode_between_chunks"):
        SchedulerConfig(model_path=tiny_qwen3(), decode_between_chunks=1)


# 重叠调度第 11 章才有：本章的树里只测关着的情形，第 11 章起两种都测
OVERLAP_MODES = [False, True] if hasattr(minisgl.env.ENV, "DISABLE_OVERLAP_SCHEDULING") else [False]


@pytest.mark.parametrize("overlap", OVERLAP_MODES)
def test_a_duplicate_prefix_does_not_take_the_pages_a_chunked_request_reserved(overlap, monkeypatch):
    """提示 [A, A, C]（各 4 个 token），max_tokens 1、6、8，20 页，每步最多算 4 个 token。
    第一个 A 生成 1 个就结束，页进缓存可以逐出；第二个 A 不能替它锁住这些页——那是 C 分块时
    预留里算着的页。第 11 章起重叠调度默认打开，MINISGL_DISABLE_OVERLAP_SCHEDULING=1 关掉。"""
    monkeypatch.setenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", "0" if overlap else "1")
    path = tiny_qwen3()
    a, c = [101, 102, 103, 104], [201, 202, 203, 204]
    llm = LLM(path, max_running_req=4, page_size=1, num_page_override=20,
              max_seq_len_override=32, max_extend_tokens=4)
    assert getattr(llm, "overlap", False) == overlap
    outs = llm.generate([a, a, c], [SamplingParams(max_tokens=n, ignore_eos=True) for n in (1, 6, 8)])
    assert [o["token_ids"] for o in outs] == [hf_greedy(path, p, n) for p, n in ((a, 1), (a, 6), (c, 8))]
    llm.cache_manager.check_integrity()
    llm.shutdown()
