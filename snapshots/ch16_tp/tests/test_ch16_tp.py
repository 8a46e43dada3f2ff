"""第 16 章：张量并行。每个 rank 是一个真实的进程，经 gloo 通信；参照是单进程的 Hugging Face。

引擎层面（每个 rank 一个进程，各建一个 LLM，喂同样的提示，这就是离线的 TP）：
- 批大小 1、3、8 的贪心输出都与 HF 相同（上游 #98：LM head 的 all_gather 在批大小 > 1 时拼错了列），
  把拼接故意写错的版本就不同；TP=16（8 个 KV 头，每个复制到 2 个 rank）也与 HF 相同；
- 各 rank 的 KV 池页数相同（取最小值），同一台机器上的 rank 平分内存和 CPU 核；
- 随机采样以 rank 0 为准：各 rank 的随机数发生器不同步时，token 仍然相同，也与 TP=1 相同；
- 建进程组等不齐、某个 rank 死了或卡住：别的 rank 在有限的时间内报错退出，不会卡在通信里；
- 加载时每个 rank 只从文件里读自己的那一份。
服务层面（python -m minisgl，官方 openai 客户端）：TP=2、TP=4（tiny Qwen3）、TP=3（SmolLM2）的
贪心回答与 HF 相同，流式和非流式都是；rank 1 死了，等待的请求得到错误，服务器退出，不留进程；
切不开模型的 --tp-size 在起任何进程之前就是一行中文错误。
"""

from __future__ import annotations

import json
import multiprocessing.connection as mp_connection
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from test_ch15_server import Server, descendants, free_port, start_server, stop_server, wait_until_gone

from minibook.hf import hf_greedy
from minibook.models import smollm2, tiny_qwen3
from minisgl.core import SamplingParams
from minisgl.utils.hf import load_tokenizer

QWEN3 = tiny_qwen3()
SMOL = smollm2()
PROMPTS = ["The capital of France is", "Once upon a time", "def fibonacci(n):", "1, 2, 3, 4,",
           "The quick brown fox", "Water boils at", "My favourite colour is", "import numpy as np"]
NEW = 8
DEADLINE = 300.0  # 秒：只防挂死，不是计时断言


_HF: dict[tuple, list[int]] = {}


def hf_text_tokens(model, prompt: str, n: int = NEW) -> list[int]:
    key = (str(model), prompt, n)
    if key not in _HF:
        ids = load_tokenizer(model).encode(prompt)
        _HF[key] = hf_greedy(model, ids, n)
    return _HF[key]


# ---------------------------------------------------------------- 每个 rank 一个进程


def _rank_entry(rank: int, size: int, port: int, out, task: str, kw: dict) -> None:
    """rank 进程的入口：跑 TASKS[task]，把结果或异常（一行字）经自己的管道交回测试进程。"""
    try:
        out.send((rank, "ok", TASKS[task](rank, size, port, out, **kw)))
    except BaseException as e:  # 交回去让测试判断；进程照样退出
        out.send((rank, "error", f"{type(e).__name__}: {e}"))


def _new_llm(rank: int, size: int, port: int, model: str, **fields):
    from minisgl.distributed import DistributedInfo
    from minisgl.llm import LLM

    fields.setdefault("num_page_override", 512)
    fields.setdefault("max_seq_len_override", 128)
    return LLM(model, tp_info=DistributedInfo(rank, size), distributed_port=port, **fields)


def _task_generate(rank, size, port, out, model, batches, temperature=0.0, seeds=(0,), free_bytes=None,
                   broken_lm_head=False, **fields):
    """按 batches 里的每一组提示各 generate 一次；返回每组的 token、页数、线程数等。
    seeds：每个 rank 的采样器种子（按 rank 轮流取），用来让各 rank 的随机数发生器故意不同步。"""
    from minisgl.distributed.impl import gather_into_one_tensor

    threads_before = torch.get_num_threads()
    if free_bytes is not None:  # 让每个 rank 看到不同的空闲内存
        import minisgl.engine.engine as engine_module

        engine_module._free_memory = lambda device: free_bytes[rank]
    if broken_lm_head:
        _break_lm_head_gather()
    llm = _new_llm(rank, size, port, model, seed=seeds[rank % len(seeds)], **fields)
    params = SamplingParams(max_tokens=NEW, temperature=temperature, ignore_eos=True)
    tokens = [[o["token_ids"] for o in llm.generate(b, params)] for b in batches]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 收进一个张量的 all_gather 不该再有弃用警告
        into_one = gather_into_one_tensor() if size > 1 else None
    result = {"tokens": tokens, "num_pages": llm.engine.num_pages,
              "page_bytes": llm.engine.kv_bytes_per_page(), "threads_before": threads_before,
              "threads": torch.get_num_threads(), "gather_into_one": into_one}
    llm.shutdown()
    return result


def _break_lm_head_gather() -> None:
    """上游 #98 之前的写法：all_gather 的结果 [tp × 批, 本段词表] 直接 view 成 [批, 词表]。
    批大小为 1 时恰好是对的，大于 1 时各行混进了别的请求的 logits。"""
    import torch.nn.functional as F

    from minisgl.core import get_global_ctx
    from minisgl.layers import embedding

    def forward(self, x):
        batch = get_global_ctx().batch
        if batch.is_prefill:
            x = x[embedding._last_token_rows(batch.reqs, x.device)]
        logits = F.linear(x, self._tied.weight if self._tied is not None else self.weight).float()
        gathered = self._comm.all_gather(logits)
        return gathered.reshape(logits.shape[0], -1)[:, : self.num_embeddings]

    embedding.ParallelLMHead.forward = forward


def _task_generate_forever(rank, size, port, out, model, distributed_timeout=60.0):
    """一直生成，直到出错；第一轮生成完报一声"在跑了"。"""
    llm = _new_llm(rank, size, port, model, distributed_timeout=distributed_timeout)
    params = SamplingParams(max_tokens=32, ignore_eos=True)
    llm.generate(PROMPTS[:2], params)
    out.send((rank, "running", os.getpid()))
    while True:
        llm.generate(PROMPTS[:2], params)


def _task_init_alone(rank, size, port, out, model, distributed_timeout):
    """只有这一个 rank 来了：建进程组应当在 distributed_timeout 秒后报错。"""
    start = time.monotonic()
    try:
        _new_llm(rank, size, port, model, distributed_timeout=distributed_timeout)
    except RuntimeError as e:
        return {"error": str(e), "seconds": time.monotonic() - start}
    return {"error": None}


TASKS = {"generate": _task_generate, "generate_forever": _task_generate_forever,
         "init_alone": _task_init_alone}


def _rank_context():
    """rank 进程从 forkserver 里 fork 出来：forkserver 只启动一次，先把本模块（连同 torch、transformers）
    import 好，之后每个 rank 都是它的一个干净副本，不用各自再花几秒 import（TP=16 时就是 16 份）。
    forkserver 自己没跑过任何计算、没有线程，fork 它是安全的；rank 仍是独立的进程，各自建进程组。"""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    return ctx


class Ranks:
    """size 个 rank 进程（只起 ranks 里的那几个），结果经每个 rank 自己的管道收回来。

    不用一个大家共用的 multiprocessing.Queue：几个进程往同一个队列里写，要轮流拿一把跨进程的锁；
    测试会 kill -9 某个 rank，它要是正拿着这把锁（刚发完一条消息、还没放下），别的 rank 再也写不进去，
    测试就收不到它们的报错。一个 rank 一根管道，死了的 rank 只是让自己那根管道到了头。
    """

    def __init__(self, size: int, task: str, ranks: list[int] | None = None, **kw) -> None:
        ctx = _rank_context()
        port = free_port()
        self.procs, self.pipes = {}, []
        for r in (range(size) if ranks is None else ranks):
            reader, writer = ctx.Pipe(duplex=False)
            self.procs[r] = ctx.Process(target=_rank_entry, args=(r, size, port, writer, task, kw))
            self.procs[r].start()
            writer.close()  # 测试进程只读；子进程退出后读端才会读到头（EOF）
            self.pipes.append(reader)

    def get(self, timeout: float = DEADLINE) -> tuple:
        """下一条消息（哪个 rank 先发就先收哪个）；timeout 秒内没有任何消息时抛 TimeoutError。"""
        deadline = time.monotonic() + timeout
        while self.pipes:
            ready = mp_connection.wait(self.pipes, timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            for pipe in ready:
                try:
                    return pipe.recv()
                except EOFError:  # 这个 rank 退出了，管道里也没有消息了
                    self.pipes.remove(pipe)
                    pipe.close()
        if not self.pipes:
            raise TimeoutError("每个 rank 都退出了，没有更多的消息")
        raise TimeoutError(f"{timeout:.0f} 秒内没有任何 rank 交回消息（还开着的管道：{len(self.pipes)} 根）")

    def results(self) -> dict[int, dict]:
        """等每个 rank 交回结果；有 rank 出错就让测试失败，并带上它的报错。"""
        got = {}
        while len(got) < len(self.procs):
            rank, status, value = self.get()
            assert status == "ok", f"rank {rank} 出错：{value}"
            got[rank] = value
        return got

    def close(self) -> None:
        for p in self.procs.values():
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()
        for pipe in self.pipes:
            pipe.close()
        self.pipes = []


def run_ranks(size: int, task: str, **kw) -> dict[int, dict]:
    ranks = Ranks(size, task, **kw)
    try:
        return ranks.results()
    finally:
        ranks.close()


# ---------------------------------------------------------------- 引擎层面：与 HF 相同


def test_lm_head_gather_is_right_for_batches_of_1_3_8_and_the_old_reshape_is_not():
    """上游 #98 的回归测试：TP=2，一批 1、3、8 个请求，贪心输出都与 HF 相同；两个 rank 也相同。
    把 LM head 的拼接写成 #98 之前的样子，批大小 1 仍然对，3 和 8 就错了：这个测试抓得住它。"""
    batches = [PROMPTS[:1], PROMPTS[:3], PROMPTS[:8]]
    want = [[hf_text_tokens(QWEN3, p) for p in b] for b in batches]
    got = run_ranks(2, "generate", model=str(QWEN3), batches=batches, max_running_req=8)
    assert got[0]["tokens"] == got[1]["tokens"] == want
    broken = run_ranks(2, "generate", model=str(QWEN3), batches=batches, max_running_req=8,
                       broken_lm_head=True)[0]["tokens"]
    assert broken[0] == want[0] and broken[1] != want[1] and broken[2] != want[2]


def test_each_rank_takes_its_share_of_the_cores_and_gathers_into_one_tensor():
    got = run_ranks(2, "generate", model=str(QWEN3), batches=[PROMPTS[:1]])
    cores = len(os.sched_getaffinity(0))
    for r in got.values():
        assert r["threads"] == max(1, min(r["threads_before"], cores // 2))
        assert r["gather_into_one"] is True  # torch 2.13 的 gloo 支持，而且没有弃用警告
    assert sum(r["threads"] for r in got.values()) <= max(cores, 2)


def test_tp16_replicates_kv_heads_and_equals_hf():
    """16 个 rank、8 个 KV 头：每个 KV 头复制到 2 个 rank 上，输出仍与 HF 逐 token 相同。"""
    prompts = PROMPTS[:2]
    # 16 个进程挤在 2 个核上：最早到的 rank 在第一次通信里要等最晚加载完的那个，放宽超时只为防误报
    got = run_ranks(16, "generate", model=str(QWEN3), batches=[prompts], num_page_override=64,
                    distributed_timeout=300.0)
    want = [hf_text_tokens(QWEN3, p) for p in prompts]
    assert all(r["tokens"] == [want] for r in got.values())


# ---------------------------------------------------------------- 各 rank 必须一致的东西


def test_ranks_agree_on_the_kv_pool_and_share_host_memory():
    """两个 rank 量到的空闲内存不同（3 GiB、2 GiB）：页数都取小的那个；同一台机器上的两个 rank
    各拿 memory_ratio 的一半，加起来不超过一份。"""
    free = {0: 3 << 30, 1: 2 << 30}
    got = run_ranks(2, "generate", model=str(QWEN3), batches=[PROMPTS[:1]], free_bytes=free,
                    memory_ratio=0.01, num_page_override=None)
    pages = {r["num_pages"] for r in got.values()}
    page_bytes = got[0]["page_bytes"]
    assert pages == {int(min(free.values()) * 0.01) // 2 // page_bytes}, pages


def test_every_rank_takes_rank0s_sampled_token():
    """随机采样（temperature 0.8）时，两个 rank 的随机数发生器故意用不同的种子：token 仍然相同
    （以 rank 0 为准），而且与单进程、rank 0 的种子生成的相同。"""
    from minisgl.llm import LLM

    batches = [PROMPTS[:3]]
    got = run_ranks(2, "generate", model=str(QWEN3), batches=batches, temperature=0.8,
                    seeds=(1234, 99))
    assert got[0]["tokens"] == got[1]["tokens"]
    llm = LLM(str(QWEN3), num_page_override=512, max_seq_len_override=128, seed=1234)
    try:
        single = [o["token_ids"] for o in llm.generate(
            batches[0], SamplingParams(max_tokens=NEW, temperature=0.8, ignore_eos=True))]
    finally:
        llm.shutdown()
    assert got[0]["tokens"] == [single]


def test_finished_requests_give_back_their_resources_in_uid_order():
    """重叠调度时，在途那一批里结束（或取消）的请求要等那一批做完才还资源。还的顺序决定前缀缓存里
    叶子的时间戳（以后先逐出谁），所以必须每个 rank 都一样：按 uid，而不是按 set 的迭代顺序
    （对象地址：先建的请求地址小）。这里按打乱的 uid 顺序建请求，在途时全部取消。"""
    from minisgl.llm import LLM

    llm = LLM(str(QWEN3), num_page_override=512, max_seq_len_override=128, max_running_req=8)
    released: list[int] = []
    release = llm._release_req
    llm._release_req = lambda req: (released.append(req.uid), release(req))[1]
    uids = [5, 2, 7, 0, 3, 6, 1, 4]
    tokenizer = load_tokenizer(QWEN3)
    try:
        assert llm.overlap, "这个测试要重叠调度：在途的请求等那一批做完再还"
        for uid, prompt in zip(uids, PROMPTS):
            llm.add_req(uid, torch.tensor(tokenizer.encode(prompt)), SamplingParams(max_tokens=16))
        llm.step()  # 发出 prefill，它还在途
        assert llm.inflight is not None
        for uid in uids:
            assert llm.abort_req(uid)
        assert released == []  # 在途：一个都还不能还
        while llm.runnable:
            llm.step()
    finally:
        llm.shutdown()
    assert released == sorted(uids), released


# ---------------------------------------------------------------- 出错时：有限的时间内退出


def test_a_missing_rank_is_a_chinese_error_after_the_timeout():
    """world size 2，只来了 rank 0：建进程组在 distributed_timeout 秒后报错，而不是等 30 分钟。"""
    got = run_ranks(2, "init_alone", ranks=[0], model=str(QWEN3), distributed_timeout=3.0)[0]
    assert got["error"] is not None and "秒内没能和另外 1 个 rank" in got["error"], got
    assert got["seconds"] < 60, got  # 防挂死的上限：超时是 3 秒


@pytest.mark.parametrize("how", ["killed", "stopped"])
def test_when_a_rank_dies_or_hangs_the_others_exit_in_bounded_time(how):
    """两个 rank 在生成。rank 1 被 kill -9（套接字随进程关掉）或 SIGSTOP（卡住、连接还在）：
    rank 0 在下一次集合通信里报错退出——前者马上，后者等到 distributed_timeout（这里 15 秒：
    再短，负载重的 2 核机器上加载慢的 rank 会让启动时的第一次通信先超时）。"""
    ranks = Ranks(2, "generate_forever", model=str(QWEN3), distributed_timeout=15.0)
    try:
        pids = {}
        while len(pids) < 2:
            rank, status, value = ranks.get()
            assert status == "running", f"rank {rank}：{value}"
            pids[rank] = value
        os.kill(pids[1], signal.SIGKILL if how == "killed" else signal.SIGSTOP)
        start = time.monotonic()
        rank, status, value = ranks.get(timeout=180)  # 防挂死的上限
        took = time.monotonic() - start
        assert (rank, status) == (0, "error"), (rank, status, value)
        assert took < 120, f"rank 0 过了 {took:.0f} 秒才报错（超时是 15 秒）"
        ranks.procs[0].join(timeout=30)
        assert ranks.procs[0].exitcode is not None, "rank 0 报错之后没有退出"
    finally:
        if how == "stopped":
            os.kill(pids[1], signal.SIGKILL)
        ranks.close()


# ---------------------------------------------------------------- 加载只读自己的那一份


def test_loading_reads_only_the_ranks_shard(monkeypatch):
    """TP=3 的每个 rank 从 safetensors 里读出的元素个数，正好是它留下的那一份（复制的 norm 除外）；
    读出的值与完整张量切出来的相同。读整个张量（get_tensor）在这里直接算失败。"""
    from safetensors import safe_open as real_open

    import minisgl.models.weight as weight
    from minisgl.distributed import set_tp_info
    from minisgl.models import ModelConfig, load_weight, shard_tensor

    read: dict[str, int] = {}

    class Recording:
        def __init__(self, handle, key):
            self.handle, self.key = handle, key

        def get_shape(self):
            return self.handle.get_shape()

        def __getitem__(self, index):
            piece = self.handle[index]
            read[self.key] = read.get(self.key, 0) + piece.numel()
            return piece

    class Opened:
        def __init__(self, f):
            self.f = f

        def keys(self):
            return self.f.keys()

        def get_slice(self, key):
            return Recording(self.f.get_slice(key), key)

        def get_tensor(self, key):
            raise AssertionError(f"读了整个张量 {key}")

    class Open:
        def __init__(self, *args, **kwargs):
            self.ctx = real_open(*args, **kwargs)

        def __enter__(self):
            return Opened(self.ctx.__enter__())

        def __exit__(self, *exc):
            return self.ctx.__exit__(*exc)

    monkeypatch.setattr(weight, "safe_open", Open)
    config = ModelConfig.from_json(SMOL)
    with real_open(str(SMOL / "model.safetensors"), "pt") as f:
        full = {k: f.get_tensor(k) for k in f.keys()}
    total = sum(t.numel() for t in full.values())
    try:
        for rank in range(3):
            read.clear()
            set_tp_info(rank, 3)
            loaded = dict(load_weight(SMOL, config))
            for key, tensor in full.items():
                mine = shard_tensor(key, tensor, rank, 3, config.num_kv_heads)
                expected = mine.numel()
                if "embed_tokens" in key:  # 最后一个 rank 补的零行不是从文件里读的
                    expected = min(mine.shape[0], tensor.shape[0] - rank * mine.shape[0]) * mine.shape[1]
                assert read[key] == expected, (key, read[key], expected)
            assert torch.equal(loaded["model.embed_tokens.weight"],
                               shard_tensor("model.embed_tokens.weight", full["model.embed_tokens.weight"],
                                            rank, 3, config.num_kv_heads))
            assert sum(read.values()) < 0.4 * total  # 三分之一多一点：norm 的权重每个 rank 都要一份
    finally:
        set_tp_info(0, 1)


# ---------------------------------------------------------------- 启动之前就说清楚


def test_a_tp_size_that_does_not_split_the_model_is_one_chinese_line():
    """SmolLM2 有 9 个 q 头、3 个 KV 头：--tp-size 2 切不开，起任何进程之前一行中文说清楚。"""
    proc = subprocess.run([sys.executable, "-m", "minisgl", "--model-path", str(SMOL), "--tp-size", "2"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0] == "错误：--tp-size 2 切不开这个模型：query 头有 9 个，不能平均分给 2 个 rank（能用的 TP 数：1、3）"
    assert "已启动" not in proc.stdout + proc.stderr


# ---------------------------------------------------------------- 服务层面：官方 openai 客户端


SERVED = {"tp2-qwen3": (QWEN3, 2), "tp4-qwen3": (QWEN3, 4), "tp3-smollm2": (SMOL, 3)}


@pytest.fixture(scope="module", params=sorted(SERVED))
def tp_server(request, tmp_path_factory):
    model, tp = SERVED[request.param]
    server = start_server(tmp_path_factory.mktemp(request.param) / "server.log",
                          "--model-path", str(model), "--tp-size", str(tp), "--num-pages", "512")
    family = descendants(server.proc.pid)
    try:
        yield model, tp, server
    finally:
        stop_server(server, family)


def _client(server):
    from openai import OpenAI

    return OpenAI(base_url=f"{server.url}/v1", api_key="unused", timeout=120, max_retries=0)


def test_served_tp_greedy_equals_hf_stream_and_not(tp_server):
    model, tp, server = tp_server
    tok = load_tokenizer(model)
    client = _client(server)
    assert f"调度器 rank {tp - 1}" in server.log()
    for prompt in PROMPTS[:2]:
        want = tok.decode(hf_text_tokens(model, prompt))
        out = client.completions.create(model=model.name, prompt=prompt, max_tokens=NEW, temperature=0,
                                        extra_body={"ignore_eos": True})
        assert out.choices[0].text == want
        chunks = client.completions.create(model=model.name, prompt=prompt, max_tokens=NEW, temperature=0,
                                           stream=True, extra_body={"ignore_eos": True})
        assert "".join(c.choices[0].text for c in chunks) == want
    chat = [{"role": "user", "content": "What is the capital of France?"}]
    text = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    ref = hf_greedy(model, tok.encode(text, add_special_tokens=False), NEW)
    if tok.eos_token_id in ref:
        ref = ref[: ref.index(tok.eos_token_id)]
    out = client.chat.completions.create(model=model.name, messages=chat, max_tokens=NEW, temperature=0)
    assert out.choices[0].message.content == tok.decode(ref)


def test_served_tp_seeded_sampling_equals_a_single_process(tp_server):
    """temperature 0.8、同一个 seed：TP 服务的回答与单进程 LLM 的相同。"""
    from minisgl.llm import LLM

    model, tp, server = tp_server
    if tp != 2:
        pytest.skip("一个 TP 配置就够了")
    params = dict(max_tokens=12, temperature=0.8, seed=7)
    out = _client(server).completions.create(model=model.name, prompt=PROMPTS[0],
                                             extra_body={"ignore_eos": True}, **params)
    llm = LLM(str(model), num_page_override=256, max_seq_len_override=128)
    try:
        single = llm.generate([PROMPTS[0]], SamplingParams(ignore_eos=True, **params))[0]["text"]
    finally:
        llm.shutdown()
    assert out.choices[0].text == single


def test_a_dead_rank1_fails_the_waiting_stream_and_the_server_exits_clean(tmp_path):
    """rank 1 被 kill -9：正在等的流收到错误，服务器以退出码 1 退出，不留进程和 IPC 目录。"""
    import httpx

    server = start_server(tmp_path / "server.log", "--model-path", str(QWEN3), "--tp-size", "2")
    family = descendants(server.proc.pid)
    try:
        ipc_dir = re.search(r"ZMQ 地址放在 (\S+)（", server.log()).group(1)
        pid = int(re.search(r"已启动调度器 rank 1（pid (\d+)）", server.log()).group(1))
        body = {"prompt": "Once upon a time", "max_tokens": 400, "temperature": 0, "ignore_eos": True,
                "stream": True}
        with httpx.Client(base_url=server.url, timeout=120) as client:
            with client.stream("POST", "/v1/completions", json=body) as r:
                lines = r.iter_lines()
                next(x for x in lines if x.startswith("data: {"))  # 已经在生成了
                os.kill(pid, signal.SIGKILL)
                events = [json.loads(x[6:]) for x in lines if x.startswith("data: {")]
        assert "error" in events[-1], events[-3:]
        server.proc.wait(timeout=120)
        assert server.proc.returncode == 1, server.log()[-3000:]
        assert not wait_until_gone(family), "服务器退出之后还有子进程活着"
        assert not os.path.exists(ipc_dir)
    finally:
        stop_server(server, family)


# ---------------------------------------------------------------- 多机：两个网络命名空间当两台机器

TREE = Path(__file__).resolve().parents[1]  # 这一章的树：`python -m minisgl` 在这里找到 minisgl
MULTINODE_DEADLINE = 180.0  # 秒；只是防止挂死，不是计时断言
DIST_PORT, HTTP_PORT = 29500, 30000  # 命名空间是新建的，里面的端口都空着

# 在 0 号"机器"的命名空间里跑的客户端：官方 openai 包，非流式和流式各问一次，打印一行 JSON
_CLIENT = """
import json, sys
from openai import OpenAI
url, model, prompt = sys.argv[1:4]
client = OpenAI(base_url=url, api_key="none", timeout=60, max_retries=0)
out = client.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=0)
chunks = list(client.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=0,
                                        stream=True))
print(json.dumps({"text": out.choices[0].text, "finish": out.choices[0].finish_reason,
                  "stream_text": "".join(c.choices[0].text for c in chunks if c.choices),
                  "stream_finish": [c.choices[0].finish_reason for c in chunks if c.choices][-1]}))
"""


def _ip(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *argv], capture_output=True, text=True, timeout=30)


@pytest.fixture
def two_hosts():
    """两台"机器"：两个网络命名空间，一对 veth 连起来（10.231.x.1 ↔ 10.231.x.2），各自的 lo 也打开。

    只动自己建的命名空间：veth 直接建在里面，删掉命名空间时它也跟着没了。
    返回 (ns0, ns1, ip0, ip1)。
    """
    if os.geteuid() != 0:
        pytest.skip("建网络命名空间要 root 权限")
    if shutil.which("ip") is None:
        pytest.skip("没有 ip 命令（iproute2），建不了网络命名空间")
    tag = f"{os.getpid()}{time.monotonic_ns() % 10_000}"
    ns = (f"minisgl{tag}a", f"minisgl{tag}b")
    subnet = f"10.231.{os.getpid() % 250 + 1}"
    ips = (f"{subnet}.1", f"{subnet}.2")
    made: list[str] = []
    try:
        for name in ns:
            r = _ip("netns", "add", name)
            if r.returncode != 0:
                pytest.skip(f"ip netns add 失败（{r.stderr.strip()}），建不了网络命名空间")
            made.append(name)
        steps = [("link", "add", "name", "veth0", "netns", ns[0], "type", "veth",
                  "peer", "name", "veth1", "netns", ns[1])]
        for i in (0, 1):
            steps += [("-n", ns[i], "addr", "add", f"{ips[i]}/24", "dev", f"veth{i}"),
                      ("-n", ns[i], "link", "set", f"veth{i}", "up"),
                      ("-n", ns[i], "link", "set", "lo", "up")]
        steps += [("netns", "exec", ns[0], "true")]  # ip netns exec 要重新挂 /sys：容器里可能不让
        for step in steps:
            r = _ip(*step)
            if r.returncode != 0:
                pytest.skip(f"ip {' '.join(step)} 失败（{r.stderr.strip()}），搭不起两台机器的网络")
        yield ns[0], ns[1], ips[0], ips[1]
    finally:
        for name in made:
            _ip("netns", "delete", name)


def _start_node(ns: str, node_rank: int, ip0: str, log_path: Path) -> Server:
    """在命名空间 ns 里起一台"机器"的 `python -m minisgl`（ip netns exec 原地 exec，pid 就是启动器）。"""
    cmd = ["ip", "netns", "exec", ns, sys.executable, "-m", "minisgl",
           "--model-path", str(QWEN3), "--tp-size", "2", "--nnodes", "2",
           "--node-rank", str(node_rank), "--dist-init-addr", f"{ip0}:{DIST_PORT}",
           "--host", ip0, "--port", str(HTTP_PORT), "--num-pages", "512"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("GLOO_SOCKET_IFNAME", None)  # 外面设的网卡名在命名空间里没有：让引擎自己挑
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=TREE)
    return Server(proc, HTTP_PORT, log_path)


def _logs(*nodes: Server) -> str:
    return "\n".join(f"---- {n.log_path.name}（退出码 {n.proc.poll()}）：\n{n.log()[-3000:]}"
                     for n in nodes)


def test_tp2_across_two_network_namespaces(two_hosts, tmp_path):
    """TP=2，一台"机器"一个 rank：openai 客户端从 0 号机器拿到的回答和 HF 贪心一样；
    0 号机器停掉后，1 号机器的启动器以退出码 1 退出，说明原因，一个进程也不留。"""
    ns0, ns1, ip0, _ = two_hosts
    model = QWEN3
    node0 = _start_node(ns0, 0, ip0, tmp_path / "node0.log")
    node1 = _start_node(ns1, 1, ip0, tmp_path / "node1.log")
    family: set[int] = set()
    try:
        # 两台机器加载模型的时候，在这边算 HF 的参照（和服务器一样分词：补全接口原样 encode）
        prompt = "The capital of France is"
        tokenizer = load_tokenizer(model)
        ref = hf_greedy(model, tokenizer.encode(prompt), 8)
        finish = "length"
        if tokenizer.eos_token_id in ref:  # EOS 不是文字的一部分
            ref, finish = ref[:ref.index(tokenizer.eos_token_id)], "stop"
        expected = tokenizer.decode(ref, skip_special_tokens=True)  # 服务器默认也跳过特殊 token

        deadline = time.monotonic() + MULTINODE_DEADLINE
        while "API server 在" not in node0.log():
            if node0.proc.poll() is not None or node1.proc.poll() is not None:
                pytest.fail(f"有一台机器启动时退出了：\n{_logs(node0, node1)}")
            if time.monotonic() > deadline:
                pytest.fail(f"{MULTINODE_DEADLINE:.0f} 秒内没有就绪：\n{_logs(node0, node1)}")
            time.sleep(0.2)
        family = {node0.proc.pid, node1.proc.pid} | descendants(node0.proc.pid) | descendants(node1.proc.pid)

        client = subprocess.run(
            ["ip", "netns", "exec", ns0, sys.executable, "-c", _CLIENT,
             f"http://{ip0}:{HTTP_PORT}/v1", model.name, prompt],
            capture_output=True, text=True, timeout=MULTINODE_DEADLINE)
        assert client.returncode == 0, f"{client.stderr[-3000:]}\n{_logs(node0, node1)}"
        got = json.loads(client.stdout)
        assert (got["text"], got["finish"]) == (expected, finish)
        assert (got["stream_text"], got["stream_finish"]) == (expected, finish)

        # 停掉 0 号机器：rank 0 和它开的会合端口一起没了，1 号机器发现后自己退出
        node0.proc.send_signal(signal.SIGTERM)
        assert node0.proc.wait(timeout=60) == 128 + signal.SIGTERM, _logs(node0, node1)
        try:
            code = node1.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"0 号机器停了 60 秒，1 号机器还没退出：\n{_logs(node0, node1)}")
        assert code == 1, _logs(node0, node1)
        assert f"0 号机器的 rank 0（{ip0}:{DIST_PORT}）连不上了" in node1.log(), _logs(node1)
        assert wait_until_gone(family) == [], _logs(node0, node1)
    finally:
        for node in (node0, node1):
            stop_server(node, family)
