"""第 21 章：压测的工具。

- random_workload：同一个种子同一批请求，长度都在给定范围里，共享前缀真的共享；坏参数是中文错误；
- poisson_arrivals：从 0 开始、递增，间隔的均值接近 1/rate；rate=inf 一次全发；
- percentile 与 numpy 的默认做法相同；TTFT、TPOT、ITL 按定义从时刻算出来；
- run_offline：每个请求正好生成 max_tokens 个 token，结果与一个一个地 generate 相同；
- run_online：对真的服务器（python -m minisgl）发流式请求，每个请求的 token 数、到达时刻都对得上；
  流式拼起来的文字和非流式的回答相同；命令行给坏参数时一行中文错误；
- launch_server：服务器起不来时的错误带着它日志的末尾，不会干等到超时。
"""

from __future__ import annotations

import asyncio
import math
import random
import subprocess
import sys

import numpy as np
import pytest
from test_ch15_server import descendants, start_server, stop_server

from minibook.models import smollm2, tiny_qwen3
import httpx

from minisgl.benchmark import (RequestTrace, launch_server, poisson_arrivals, random_workload, run_offline, run_online,
                               summarize)
from minisgl.benchmark.client import OnlineResult, percentile
from minisgl.core import SamplingParams
from minisgl.llm import LLM
from minisgl.utils.hf import load_tokenizer


def test_random_workload_is_reproducible_and_within_its_ranges():
    a = random_workload(20, seed=3, input_len=(5, 9), output_len=(2, 4), vocab_size=50)
    assert a == random_workload(20, seed=3, input_len=(5, 9), output_len=(2, 4), vocab_size=50)
    assert a != random_workload(20, seed=4, input_len=(5, 9), output_len=(2, 4), vocab_size=50)
    assert {len(r.prompt_ids) for r in a} <= set(range(5, 10)) and {r.max_tokens for r in a} <= {2, 3, 4}
    assert len({len(r.prompt_ids) for r in a}) > 1 and all(0 <= t < 50 for r in a for t in r.prompt_ids)


def test_shared_prefix_is_shared_and_zero_changes_nothing():
    plain = random_workload(12, seed=5, input_len=(3, 8), output_len=(1, 2), vocab_size=100)
    assert random_workload(12, seed=5, input_len=(3, 8), output_len=(1, 2), vocab_size=100, shared_prefix=0) == plain
    shared = random_workload(12, seed=5, input_len=(3, 8), output_len=(1, 2), vocab_size=100, shared_prefix=20)
    prefixes = {tuple(r.prompt_ids[:20]) for r in shared}
    assert len(prefixes) == 1 and all(23 <= len(r.prompt_ids) <= 28 for r in shared)
    assert len({tuple(r.prompt_ids[20:]) for r in shared}) == 12  # 前缀之后各不相同
    other = random_workload(12, seed=6, input_len=(3, 8), output_len=(1, 2), vocab_size=100, shared_prefix=20)
    assert other[0].prompt_ids[:20] != shared[0].prompt_ids[:20]  # 前缀也由种子定


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_requests=0), "num_requests"), (dict(num_requests=2, input_len=(9, 5)), "input_len"),
    (dict(num_requests=2, output_len=(0, 3)), "output_len"), (dict(num_requests=2, vocab_size=0), "vocab_size"),
    (dict(num_requests=2, shared_prefix=-1), "shared_prefix"),
])
def test_bad_workload_settings_are_chinese_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        random_workload(**kwargs)


def test_poisson_arrivals():
    times = poisson_arrivals(4000, rate=5.0, seed=1)
    gaps = np.diff(times)
    assert times[0] == 0 and (gaps > 0).all()
    assert abs(gaps.mean() - 1 / 5.0) < 0.02  # 4000 个间隔：均值的标准差约 0.2 / √4000 ≈ 0.003
    assert abs(gaps.std() - 1 / 5.0) < 0.02  # 指数分布的标准差等于均值
    assert times == poisson_arrivals(4000, rate=5.0, seed=1)
    assert poisson_arrivals(3, rate=math.inf) == [0.0, 0.0, 0.0]
    for bad in (0, -1.0, "2"):
        with pytest.raises(ValueError, match="rate"):
            poisson_arrivals(3, rate=bad)


def test_percentile_equals_numpy_on_random_lists():
    rng = random.Random(0)
    for _ in range(200):
        values = [rng.uniform(-5, 5) for _ in range(rng.randint(1, 40))]
        q = rng.choice([0, 50, 90, 99, 100, rng.uniform(0, 100)])
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_trace_metrics_follow_their_definitions():
    t = RequestTrace(sent=1.0, chunks=[1.5, 1.6, 1.9, 2.0], prompt_tokens=7, output_tokens=5)
    assert t.ttft == pytest.approx(0.5)
    assert t.tpot == pytest.approx((2.0 - 1.5) / 4)  # 5 个 token、4 段：扣住的半个字让一段是两个 token
    assert t.itl == pytest.approx([0.1, 0.3, 0.1])
    assert RequestTrace(0.0, [0.2], 3, 1).tpot is None
    s = summarize(OnlineResult([t, RequestTrace(0.0, [0.2], 3, 1)], makespan=2.0))
    assert s["output_tokens"] == 6 and s["throughput"] == pytest.approx(3.0)
    assert s["ttft_p50_ms"] == pytest.approx(350.0) and s["tpot_p99_ms"] == pytest.approx(125.0)


def test_run_offline_generates_exactly_max_tokens_and_equals_one_by_one():
    path = tiny_qwen3()
    work = random_workload(6, seed=0, input_len=(3, 20), output_len=(2, 9), vocab_size=1000)
    llm = LLM(str(path), max_running_req=4, num_page_override=256, max_seq_len_override=64)
    try:
        result = run_offline(llm, work)
        batched = llm.generate([r.prompt_ids for r in work],
                               [SamplingParams(max_tokens=r.max_tokens, ignore_eos=True) for r in work])
        alone = [llm.generate([r.prompt_ids], SamplingParams(max_tokens=r.max_tokens, ignore_eos=True))[0]
                 for r in work]
    finally:
        llm.shutdown()
    assert result.output_tokens == sum(r.max_tokens for r in work)
    assert result.input_tokens == sum(len(r.prompt_ids) for r in work) and result.requests == 6
    assert result.output_throughput > 0 and result.total_throughput > result.output_throughput
    assert [o["token_ids"] for o in batched] == [o["token_ids"] for o in alone] == result.outputs


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = start_server(tmp_path_factory.mktemp("bench") / "server.log")
    yield srv
    stop_server(srv, descendants(srv.proc.pid))


@pytest.mark.parametrize("rate", [math.inf, 8.0])
def test_run_online_against_a_real_server(server, rate):
    tok = load_tokenizer(smollm2())
    work = random_workload(6, seed=1, input_len=(10, 40), output_len=(3, 12), vocab_size=5000)
    requests = [(tok.decode(r.prompt_ids), r.max_tokens) for r in work]
    result = run_online(server.url, requests, rate, seed=2)
    arrivals = poisson_arrivals(6, rate, seed=2)
    for trace, (_, max_tokens), at in zip(result.traces, requests, arrivals):
        assert trace.output_tokens == max_tokens and trace.prompt_tokens > 0
        assert trace.sent >= at - 1e-3 and trace.ttft > 0  # 不早于它的到达时刻发出
        assert trace.chunks == sorted(trace.chunks) and 1 <= len(trace.chunks) <= max_tokens
        assert trace.chunks[-1] <= result.makespan
    s = summarize(result)
    assert s["requests"] == 6 and s["output_tokens"] == sum(m for _, m in requests)
    # 一段一段拼起来的文字，就是同一个请求不流式时的回答（温度 0）
    prompt, max_tokens = requests[0]
    whole = httpx.post(f"{server.url}/v1/completions", json={"prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0, "ignore_eos": True}, timeout=300).json()["choices"][0]["text"]
    assert whole and result.traces[0].text == whole
    if math.isinf(rate):  # 调用方自己在一个事件循环里（Jupyter 就是这样）也能用
        async def inside_a_loop():
            return run_online(server.url, requests[:1], rate)

        assert asyncio.run(inside_a_loop()).traces[0].text == whole
    assert 0 < s["ttft_p50_ms"] <= s["ttft_p99_ms"] and 0 < s["itl_p50_ms"] <= s["itl_p99_ms"]


def test_cli_runs_and_bad_settings_are_one_chinese_line(server):
    cmd = [sys.executable, "-m", "minisgl.benchmark", "--url", server.url, "--tokenizer", str(smollm2())]
    ok = subprocess.run(cmd + ["--num-requests", "3", "--input-len", "5", "10", "--output-len", "2", "4"],
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "requests         3" in ok.stdout and "ttft_p99_ms" in ok.stdout
    bad = subprocess.run(cmd + ["--rate", "0"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and bad.stderr.startswith("压测失败：") and "rate" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_launch_server_reports_a_failed_start_with_its_log(tmp_path):
    with pytest.raises(RuntimeError, match="服务器启动时退出了") as info:
        with launch_server("--model-path", str(tmp_path / "没有这个模型"), timeout=120):
            pass
    assert "没有这个模型" in str(info.value)  # 日志的末尾：服务器自己说了哪里不对
