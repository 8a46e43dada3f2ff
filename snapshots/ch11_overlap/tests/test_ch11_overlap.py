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

import minisgl.scheduler.scheduler as scheduler_module
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


def penalized_greedy_reference(path, prompt: list[int], n: int, presence: float,
                               frequency: float) -> list[int]:
    """HF 的 logits 逐步加上 OpenAI 的惩罚再取 argmax：每一步按已生成的 token 重新数。"""
    from minibook.hf import hf_logits

    out: list[int] = []
    for _ in range(n):
        logits = hf_logits(path, prompt + out)[-1].clone()
        for token in set(out):
            logits[token] -= presence + frequency * out.count(token)
        out.append(int(logits.argmax()))
    return out


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "no_overlap"])
def test_penalty_counts_follow_the_device_tokens_under_overlap(overlap, monkeypatch):
    """重叠时第 N 步的 token 还没回到 CPU，第 N+1 步就发出了：惩罚的计数在设备上记，不能少算一步。"""
    if overlap:
        monkeypatch.delenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", raising=False)
    else:
        monkeypatch.setenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", "1")
    path = smollm2()
    # 贪心在这里会连着生成两个同样的 token：计数晚一步的话，第二个逃过了惩罚
    prompt = encode(path, "a a a a a a a a a a a a")
    llm = make_llm(path, max_running_req=2)
    assert llm.overlap == overlap
    n = 6
    params = [SamplingParams(max_tokens=n, ignore_eos=True, presence_penalty=2.0,
                             frequency_penalty=1.5),
              SamplingParams(max_tokens=n, ignore_eos=True)]
    outs = llm.generate([prompt, prompt], params)
    llm.shutdown()
    assert outs[0]["token_ids"] == penalized_greedy_reference(path, prompt, n, 2.0, 1.5)
    assert outs[1]["token_ids"] == hf_greedy(path, prompt, n)
    assert outs[0]["token_ids"] != outs[1]["token_ids"]  # 惩罚真的改变了输出


def test_seeded_tokens_are_the_same_with_overlap_on_or_off_and_alone_or_crowded(monkeypatch):
    path = tiny_qwen3()
    prompts = [encode(path, t) for t in TEXTS]
    mine = SamplingParams(max_tokens=10, ignore_eos=True, temperature=1.0, seed=2024,
                          frequency_penalty=0.5, logprobs=True)
    others = [SamplingParams(max_tokens=k, ignore_eos=True, temperature=0.8) for k in (3, 7, 5)]
    runs = []
    for overlap, crowded in [(True, True), (False, True), (True, False)]:
        if overlap:
            monkeypatch.delenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", raising=False)
        else:
            monkeypatch.setenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", "1")
        # 2 行、小 token 预算：请求陆续进出、行被重用、长提示分块 prefill
        llm = make_llm(path, max_running_req=2, max_extend_tokens=4)
        batch = prompts if crowded else prompts[:1]
        outs = llm.generate(batch, [mine] + others[: len(batch) - 1])
        runs.append(outs[0]["token_ids"])
        llm.shutdown()
    assert runs[0] == runs[1] == runs[2], runs
    assert len(set(runs[0])) > 2  # 真的在采样


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


def test_a_failed_task_fails_every_later_task_and_event():
    """像 CUDA 的错误一样粘住：失败之后排着的任务不再执行，之后的事件和提交都抛同一个异常。"""
    stream, ran = CpuStream(num_threads=1), []
    gate = threading.Event()
    stream.submit(gate.wait)
    stream.submit(lambda: 1 / 0)
    later = CpuEvent(stream.submit(lambda: ran.append("后面的任务")))
    gate.set()
    with pytest.raises(ZeroDivisionError):
        later.synchronize()
    with pytest.raises(ZeroDivisionError):
        stream.submit(lambda: ran.append("失败之后提交的任务"))
    with pytest.raises(ZeroDivisionError):
        stream.synchronize()
    assert ran == []
    stream.close()  # 收尾不抛
    stream.close()


class InjectedError(RuntimeError):
    pass


def fail_on_call(fn, k: int):
    """包一层：第 k 次调用（从 1 数）抛 InjectedError，其余照常。"""
    calls = []

    def wrapped(*args, **kwargs):
        calls.append(None)
        if len(calls) == k:
            raise InjectedError(f"第 {k} 次调用注入的错误")
        return fn(*args, **kwargs)

    return wrapped


@pytest.mark.parametrize("where", ["gather", "forward", "write_back"])
def test_a_failure_on_the_worker_reaches_generate_not_garbage_tokens(where, monkeypatch):
    """工作线程上取输入、前向、写回三处任何一处出错，异常都从 LLM.generate 抛出来。

    吞掉它的话，调度器读到的是没人写过的结果张量（torch.empty），当成 token 交出去。
    """
    monkeypatch.delenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", raising=False)
    path = tiny_qwen3()
    llm = make_llm(path)
    if where == "gather":
        monkeypatch.setattr(scheduler_module, "_gather_input_ids",
                            fail_on_call(scheduler_module._gather_input_ids, 3))
    elif where == "forward":
        llm.engine._forward_and_sample = fail_on_call(llm.engine._forward_and_sample, 3)
    else:  # token_pool 是张量：实例上的属性盖过方法
        llm.token_pool.index_put_ = fail_on_call(llm.token_pool.index_put_, 3)
    prompts = [encode(path, t) for t in TEXTS[:2]]
    with pytest.raises(InjectedError):
        llm.generate(prompts, SamplingParams(max_tokens=6, ignore_eos=True))
    with pytest.raises(InjectedError):  # 出过错的"流"一直报这个错
        llm.step()
    with pytest.raises(InjectedError):  # shutdown 也报，但照样收尾：之后能建新的 LLM
        llm.shutdown()
    llm = make_llm(path)
    assert llm.generate(prompts[:1], SamplingParams(max_tokens=3, ignore_eos=True))[0]["token_ids"] \
        == hf_greedy(path, prompts[0], 3)
    llm.shutdown()


def test_the_worker_runs_in_inference_mode_with_all_threads(monkeypatch):
    """工作线程上的任务在 inference_mode 里，用调用线程的全部 intra-op 线程。

    服务在 torch.inference_mode() 里建调度器，token 池就是 inference 张量；inference_mode 只对
    进入它的线程有效，工作线程要是不在里面，写回 token 池就是 "Inplace update to inference
    tensor outside InferenceMode"。
    """
    monkeypatch.delenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", raising=False)
    path = tiny_qwen3()
    prompts = [encode(path, t) for t in TEXTS]
    threads, seen = torch.get_num_threads(), []
    torch.set_num_threads(2)
    try:
        with torch.inference_mode():  # 和服务里一样：调度器在 inference_mode 里建、在里面跑
            llm = make_llm(path)
            assert llm.token_pool.is_inference()
            llm.engine.enqueue(lambda: seen.append((torch.is_inference_mode_enabled(),
                                                    torch.get_num_threads())))
            outs = llm.generate(prompts, SamplingParams(max_tokens=5, ignore_eos=True))
            llm.shutdown()
    finally:
        torch.set_num_threads(threads)
    assert seen == [(True, 2)]
    assert [o["token_ids"] for o in outs] == [hf_greedy(path, p, 5) for p in prompts]


@pytest.mark.parametrize("preset,torch_first,expected", [
    (None, False, "PASSIVE"),      # 默认：等的 OpenMP 线程马上睡
    ("ACTIVE", False, "ACTIVE"),   # 用户自己设了的，照用户的
    (None, True, None),            # torch 已经导入：OpenMP 读过环境变量了，设了也没用，就不设
])
def test_importing_minisgl_first_makes_waiting_openmp_threads_sleep(preset, torch_first, expected, monkeypatch):
    """机器被别的进程占满时，忙等的 OpenMP 线程抢走干活的线程的核，2 个线程的 decode 塌掉一半以上
    （examples/ch11_threads.py 量给你看）。新起一个解释器看 import minisgl 之后的环境变量。"""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if preset:
        env["OMP_WAIT_POLICY"] = preset
    code = ("import torch\n" if torch_first else "") + "import os, minisgl; print(os.environ.get('OMP_WAIT_POLICY'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(expected)


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


def test_abort_of_an_inflight_chunk_drops_its_uid_once(monkeypatch):
    """取消一个分块算到一半、那一块还在途的请求：uid 随行和页一起，在延迟释放时注销一次。

    取消时就注销、释放时再注销一次的话，两次之间用同一个 uid 进来的新请求会被第二次注销抹掉，
    之后第三个同号的请求也能进来。
    """
    monkeypatch.delenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", raising=False)
    path = tiny_qwen3()
    long_prompt = encode(path, " ".join(TEXTS))
    short = encode(path, TEXTS[0])
    assert len(long_prompt) > 8
    llm = make_llm(path, max_extend_tokens=4)  # 长提示要分好几块
    llm.add_req(0, ids(long_prompt), SamplingParams(max_tokens=4, ignore_eos=True))
    assert llm.step() == []  # 第一块发出了，还在途
    assert llm.abort_req(0)
    with pytest.raises(ValueError, match="uid 重复"):  # 它的行和页还没还：uid 还占着
        llm.add_req(0, ids(short), SamplingParams(max_tokens=3, ignore_eos=True))
    assert llm.step() == []  # 在途的那一块做完：行和页还了，uid 随之注销
    assert llm.table_manager.available_size == 4
    llm.add_req(0, ids(short), SamplingParams(max_tokens=3, ignore_eos=True))
    with pytest.raises(ValueError, match="uid 重复"):  # 新请求的登记还在
        llm.add_req(0, ids(short), SamplingParams(max_tokens=3, ignore_eos=True))
    replies = run_to_idle(llm)
    assert [t for t, _ in replies[0]] == hf_greedy(path, short, 3)
    llm.cache_manager.check_integrity()
    assert not llm.known_uids and not llm.finished_reqs
    llm.shutdown()
