"""第 11 章：重叠调度。输出仍与 HF 逐 token 相同；上游重叠循环里的四个竞态在这里都不发生。

四个竞态各有一个测试：
  1. 请求少生成一个 token（按 device_len 判断结束，而 device_len 已经多走了一步）；
  2. 请求在 EOS 之后又被排进一批（重叠时只会出现在已经发出的那一批里，token 丢掉）；
  3. 请求的行被新请求拿走时，在途的那一批还在往这一行的 token 池里写；
  4. 在途的 prefill 期间取消请求，同一个请求的资源被释放两次。
"""

from __future__ import annotations

import threading
import time

import pytest
import torch

from minibook.hf import encode, hf_greedy
from minibook.models import smollm2, tiny_qwen3
from minisgl.core import SamplingParams
from minisgl.engine.engine import CpuEvent, CpuStream
from minisgl.env import ENV, EnvError
from minisgl.llm import LLM

TEXTS = ["The capital of France is", "def add(a, b):", "Once upon a time,", "1, 2, 3, 4,"]


def make_llm(path, **overrides) -> LLM:
    fields = dict(max_running_req=4, page_size=2, num_page_override=128, max_seq_len_override=64)
    return LLM(path, **{**fields, **overrides})


def record_batches(llm: LLM) -> list[tuple[str, list[int]]]:
    """记下每一批发出时的阶段和请求 uid（按发出的先后）。"""
    launched: list[tuple[str, list[int]]] = []
    forward = llm.engine.forward_batch

    def recording_forward(batch, args):
        launched.append((batch.phase, [r.uid for r in batch.reqs]))
        return forward(batch, args)

    llm.engine.forward_batch = recording_forward  # type: ignore[method-assign]
    return launched


def run_to_idle(llm: LLM) -> dict[int, list]:
    """一步步跑到没事可做，按 uid 收集每一步报告的 (token, finished)。"""
    replies: dict[int, list] = {}
    while llm.runnable:
        for out in llm.step():
            replies.setdefault(out.uid, []).append((out.next_token, out.finished))
    return replies


def ids(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int32)


# ---------------------------------------------------------------- 开关与输出


def test_overlap_is_on_by_default_and_the_env_turns_it_off(monkeypatch):
    monkeypatch.delenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", raising=False)
    llm = make_llm(tiny_qwen3())
    assert llm.overlap and isinstance(llm.engine.worker, CpuStream)
    llm.shutdown()
    monkeypatch.setenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", "1")
    llm = make_llm(tiny_qwen3())
    assert not llm.overlap and llm.engine.worker is None
    llm.shutdown()
    monkeypatch.setenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", "maybe")
    with pytest.raises(EnvError, match="MINISGL_DISABLE_OVERLAP_SCHEDULING"):
        ENV.DISABLE_OVERLAP_SCHEDULING


@pytest.mark.parametrize("model", [smollm2, tiny_qwen3], ids=["smollm2", "tiny_qwen3"])
def test_overlap_output_equals_hf(model, monkeypatch):
    monkeypatch.delenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", raising=False)
    path = model()
    # 页表只有 2 行：请求陆续结束、陆续进来，释放和接纳都发生在有一批在途的时候
    llm = make_llm(path, max_running_req=2, page_size=1, num_page_override=256)
    max_tokens = [7, 3, 11, 5]
    prompts = [encode(path, t) for t in TEXTS]
    launched = record_batches(llm)
    outs = llm.generate(prompts, [SamplingParams(max_tokens=n, ignore_eos=True) for n in max_tokens])
    for prompt, out, n in zip(prompts, outs, max_tokens):
        assert out["token_ids"] == hf_greedy(path, prompt, n)
    llm.cache_manager.check_integrity()  # 空闲页 + 缓存持有的页 == 总页数
    assert llm.table_manager.available_size == 2 and not llm.finished_reqs
    assert len(launched) > 4  # 真的跑了很多步，不是一步出结果
    llm.shutdown()


def test_overlap_with_a_shared_prefix_and_a_small_token_budget_equals_hf(monkeypatch):
    """前缀缓存（第 8、9 章）和分块 prefill（第 10 章）在重叠模式下：缓存在有一批在途时插入、
    被别的请求匹配，长提示分几步 prefill，输出仍与 HF 一致，空闲时账目核对通过。"""
    monkeypatch.delenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", raising=False)
    path = tiny_qwen3()
    system = encode(path, "You are a helpful assistant. Answer briefly and clearly, please. " * 3)
    prompts = [system + encode(path, q) for q in (" Why is the sky blue?", " What is 2 + 2?",
                                                  " Name a color.", " Say hi.")]
    llm = make_llm(path, max_running_req=2, page_size=4, num_page_override=64,
                   max_seq_len_override=96, max_extend_tokens=16)
    outs = llm.generate(prompts, [SamplingParams(max_tokens=n, ignore_eos=True) for n in (6, 3, 5, 2)])
    for prompt, out, n in zip(prompts, outs, (6, 3, 5, 2)):
        assert out["token_ids"] == hf_greedy(path, prompt, n)
    llm.cache_manager.check_integrity()
    assert llm.table_manager.available_size == 2 and not llm.finished_reqs
    llm.shutdown()


# ---------------------------------------------------------------- 引擎一侧：工作线程


def test_cpu_stream_runs_tasks_in_order_on_one_thread():
    stream, seen = CpuStream(num_threads=1), []
    futures = [stream.submit(lambda i=i: seen.append((i, threading.get_ident()))) for i in range(50)]
    stream.synchronize()
    assert [i for i, _ in seen] == list(range(50))
    assert len({tid for _, tid in seen}) == 1 and seen[0][1] != threading.get_ident()
    assert all(f.done() for f in futures)
    stream.close()


def test_cpu_event_reraises_what_the_task_raised():
    stream = CpuStream(num_threads=1)
    event = CpuEvent(stream.submit(lambda: 1 / 0))
    with pytest.raises(ZeroDivisionError):
        event.synchronize()
    stream.close()


def test_forward_returns_at_launch_with_the_bookkeeping_done(monkeypatch):
    """工作线程被堵住时 forward_batch 照样返回：complete_one 已在调用线程上做完，结果还没有。"""
    monkeypatch.delenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", raising=False)
    path = tiny_qwen3()
    prompt = encode(path, TEXTS[0])
    llm = make_llm(path)
    gate = threading.Event()
    llm.engine.enqueue(gate.wait)  # 堵住工作线程
    llm.add_req(0, ids(prompt), SamplingParams(max_tokens=2, ignore_eos=True))
    forward_input = llm._schedule_next_batch()
    (req,) = forward_input.batch.reqs
    output = llm._forward(forward_input)
    assert (req.cached_len, req.device_len) == (len(prompt), len(prompt) + 1)
    assert not output.copy_done.query()  # 前向还没开始
    gate.set()
    output.copy_done.synchronize()
    # 工作线程按发射时的长度前向：LM 头取的是提示的最后一个 token，而不是挪过一位的
    assert output.next_tokens_cpu.tolist() == hf_greedy(path, prompt, 1)
    llm.shutdown()


# ---------------------------------------------------------------- 四个竞态


def test_race1_exactly_max_tokens_tokens(monkeypatch):
    monkeypatch.delenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", raising=False)
    path = tiny_qwen3()
    llm = make_llm(path)
    prompts = [encode(path, t) for t in TEXTS]
    max_tokens = [1, 2, 3, 4]
    outs = llm.generate(prompts, [SamplingParams(max_tokens=n, ignore_eos=True) for n in max_tokens])
    assert [len(o["token_ids"]) for o in outs] == max_tokens
    llm.shutdown()


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "normal"])
def test_race2_after_eos_only_the_already_launched_batch(overlap, monkeypatch):
    if overlap:
        monkeypatch.delenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", raising=False)
    else:
        monkeypatch.setenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", "1")
    path = tiny_qwen3()
    prompt, other = encode(path, TEXTS[1]), encode(path, TEXTS[2])
    reference = hf_greedy(path, prompt, 8)
    k = 3  # 第 k 个生成的 token 当作 EOS（在它之前没出现过）
    assert reference[k] not in reference[:k]
    llm = make_llm(path)
    llm.eos_token_id = reference[k]
    launched = record_batches(llm)
    llm.add_req(0, ids(prompt), SamplingParams(max_tokens=8))
    llm.add_req(1, ids(other), SamplingParams(max_tokens=12, ignore_eos=True))  # 陪跑：批一直有
    replies = run_to_idle(llm)
    # 请求 0 报告了 k + 1 个 token，最后一个是 EOS 且 finished；多算的那一步没有报告
    assert replies[0] == [(t, False) for t in reference[:k]] + [(reference[k], True)]
    batches_with_0 = [i for i, (_, uids) in enumerate(launched) if 0 in uids]
    # 产生 EOS 的是第 k 批；重叠时第 k + 1 批在知道 EOS 之前已经发出，之后再也没有它
    assert batches_with_0 == list(range(k + 2 if overlap else k + 1))
    assert len(launched) > batches_with_0[-1] + 1  # 后面还有批（陪跑的请求），只是没有它
    assert llm.table_manager.available_size == 4
    llm.shutdown()


def test_race3_a_row_is_reused_only_after_the_inflight_write(monkeypatch):
    """请求 A 在 EOS 处结束时，已发出的那一批还要往 A 的行里写一个 token。

    只有 1 行：B 要等 A 的行。工作线程被放慢，在途那一批的写入一定晚于调度器线程上的下一步；
    A 的行要是当场还回去，B 的提示写进这一行之后会被这次迟到的写入改掉一个 token。
    """
    monkeypatch.delenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", raising=False)
    path = tiny_qwen3()
    prompt_a, prompt_b = encode(path, "Hi"), encode(path, TEXTS[1] + " " + TEXTS[3])
    assert len(prompt_b) > len(prompt_a) + 2  # 迟到的写入落在 B 的提示里
    first_a = hf_greedy(path, prompt_a, 1)[0]
    reference_b = hf_greedy(path, prompt_b, 4)
    assert first_a not in reference_b  # B 不会被当作遇到 EOS
    llm = make_llm(path, max_running_req=1)
    llm.eos_token_id = first_a  # A 的第一个 token 就是 EOS
    slow = llm.engine._forward_and_sample

    def slow_forward(*args):
        time.sleep(0.05)
        return slow(*args)

    llm.engine._forward_and_sample = slow_forward  # type: ignore[method-assign]
    launched = record_batches(llm)
    llm.add_req(0, ids(prompt_a), SamplingParams(max_tokens=4))
    llm.add_req(1, ids(prompt_b), SamplingParams(max_tokens=4, ignore_eos=True))
    replies = run_to_idle(llm)
    assert llm.token_pool[0, :len(prompt_b)].tolist() == prompt_b  # B 的提示没有被改掉
    assert [t for t, _ in replies[1]] == reference_b
    assert replies[0] == [(first_a, True)]
    assert launched[:3] == [("prefill", [0]), ("decode", [0]), ("prefill", [1])]
    llm.shutdown()


def test_race4_abort_during_an_inflight_prefill_frees_once(monkeypatch):
    monkeypatch.delenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", raising=False)
    path = tiny_qwen3()
    prompts = [encode(path, t) for t in TEXTS[:2]]
    llm = make_llm(path, max_running_req=2)
    llm.add_req(0, ids(prompts[0]), SamplingParams(max_tokens=5, ignore_eos=True))
    llm.add_req(1, ids(prompts[1]), SamplingParams(max_tokens=5, ignore_eos=True))
    assert llm.step() == []  # 两个请求的 prefill 已经发出，结果还没处理
    free_pages = llm.page_allocator.num_free_pages
    assert llm.abort_req(0)
    # 它还在在途的那一批里：不再调度，但行和页要等那一批做完才还
    assert llm.table_manager.available_size == 0
    assert llm.page_allocator.num_free_pages == free_pages
    assert not llm.abort_req(0)  # 第二次取消：找不到了，也不会再释放一次
    replies = run_to_idle(llm)
    assert 0 not in replies  # 取消的请求，在途那一批的 token 丢掉
    assert [t for t, _ in replies[1]] == hf_greedy(path, prompts[1], 5)
    llm.cache_manager.check_integrity()  # 空闲页 + 缓存持有的页 == 总页数
    assert llm.table_manager.available_size == 2 and not llm.finished_reqs
    llm.shutdown()
