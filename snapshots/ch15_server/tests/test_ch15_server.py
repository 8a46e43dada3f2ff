"""第 15 章：`python -m minisgl` 是一个真的服务器，官方 openai 客户端能用。

整个模块只启动一个服务器进程（模块级 fixture），用的都是真进程、真端口：
  - openai 客户端：chat 和 completions，流式和非流式；temperature=0 的回答与 HF 贪心逐 token 相同；
  - 坏请求各得到一个 4xx 和 OpenAI 格式的错误，服务器照常服务；
  - 100 个并发请求全部完成，每个拿到的是自己的答案；
  - 流式读到一半断开：请求被取消，调度器空闲时 KV 页的账目对得上；
  - 非流式的客户端超时走了：生成期间就发现，请求被取消；
  - SIGTERM：所有子进程退出，端口和 IPC 目录都释放（这个测试弄坏模块级的服务器，排在用它的测试之后）。
另外几个测试各起自己的服务器：杀掉调度器（等待的请求 503，服务器退出码 1）、kill -9 启动器
（子进程退出并删掉 IPC 目录）、KV 池放不下聊天模板（启动时报错）、长提示的块之间在跑的流照常
decode、SIGSTOP 调度器（/health 503，等待的请求得到错误，服务器退出）。
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from minibook.hf import hf_greedy
from minibook.models import smollm2
from minisgl.utils.hf import load_tokenizer

MODEL = smollm2()
NUM_PAGES = 1024  # 小 KV 池：max_seq_len = 1024
STARTUP_DEADLINE = 180.0  # 秒；只是防止挂死，不是计时断言


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> set[int]:
    """不用 psutil：扫 /proc，找出 pid 的全部子孙进程。"""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])  # 第 4 个字段；进程名里可能有空格和括号
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """进程还在（僵尸不算：它已经退出，只是还没被回收）。"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@dataclass
class Server:
    proc: subprocess.Popen
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_for_log(self, pattern: str, start: int = 0, timeout: float = 60.0) -> re.Match:
        """等日志里（从第 start 个字符起）出现 pattern；超时就失败（防挂死，不是计时断言）。"""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (m := re.search(pattern, self.log()[start:])) is not None:
                return m
            time.sleep(0.1)
        pytest.fail(f"{timeout} 秒内日志里没有出现 {pattern!r}；日志末尾：\n{self.log()[-3000:]}")


def start_server(log_path: Path, *flags: str, wait_ready: bool = True) -> Server:
    """起 `python -m minisgl`（小 KV 池），等 /v1/models 能访问。"""
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    cmd = [sys.executable, "-m", "minisgl", "--model-path", str(MODEL), "--port", str(port),
           "--num-pages", str(NUM_PAGES), "--max-running-requests", "32", *flags]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    server = Server(proc, port, log_path)
    if wait_ready:
        try:
            wait_until_ready(server)
        except BaseException:
            stop_server(server, descendants(proc.pid))
            raise
    return server


def wait_until_ready(server: Server) -> None:
    deadline = time.monotonic() + STARTUP_DEADLINE
    while True:
        if server.proc.poll() is not None:
            pytest.fail(f"服务器启动时退出了（{server.proc.returncode}）：\n{server.log()[-3000:]}")
        try:
            if httpx.get(f"{server.url}/v1/models", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"服务器 {STARTUP_DEADLINE} 秒内没有就绪：\n{server.log()[-3000:]}")
        time.sleep(0.3)


def stop_server(server: Server, family: set[int]) -> None:
    """测试结束：还活着就 SIGTERM；万一有漏网的子进程，别留下孤儿。"""
    proc = server.proc
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    for pid in family | descendants(proc.pid):
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def wait_until_gone(pids: set[int], timeout: float = 60.0) -> list[int]:
    """等这些进程都退出（防挂死的上限，不是计时断言），返回还活着的。"""
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Server:
    server = start_server(tmp_path_factory.mktemp("ch15") / "server.log")
    family = descendants(server.proc.pid)
    try:
        yield server
    finally:
        stop_server(server, family)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(MODEL)


def chat_ids(tokenizer, messages: list[dict]) -> list[int]:
    """和服务器一样套聊天模板（add_generation_prompt），得到提示的 token。"""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer.encode(text, add_special_tokens=False)


_HF_CACHE: dict[tuple[int, ...], list[int]] = {}


def hf_tokens(prompt_ids: list[int], n: int) -> list[int]:
    """HF 贪心的前 n 个新 token。每个提示只算一次（算过更长的就直接截取：贪心的前缀不变）。"""
    key = tuple(prompt_ids)
    if len(_HF_CACHE.get(key, [])) < n:
        _HF_CACHE[key] = hf_greedy(MODEL, list(prompt_ids), n)
    return _HF_CACHE[key][:n]


def expected_answer(tokenizer, prompt_ids: list[int], max_tokens: int) -> tuple[str, str, int]:
    """HF 贪心的回答：(文字, finish_reason, completion_tokens)。遇到 EOS 就停，EOS 本身不是文字。"""
    ref = hf_tokens(prompt_ids, max_tokens)
    if tokenizer.eos_token_id in ref:
        cut = ref.index(tokenizer.eos_token_id)
        return tokenizer.decode(ref[:cut]), "stop", cut + 1
    return tokenizer.decode(ref), "length", max_tokens


def openai_client(server: Server):
    from openai import OpenAI

    return OpenAI(base_url=f"{server.url}/v1", api_key="unused", timeout=60, max_retries=0)


CHAT = [{"role": "user", "content": "What is the capital of France?"}]


# ---------------------------------------------------------------- openai 客户端：答案与 HF 相同


def test_models_endpoint(server):
    models = openai_client(server).models.list()
    assert [m.id for m in models.data] == [MODEL.name]


def test_chat_non_stream_equals_hf(server, tokenizer):
    prompt = chat_ids(tokenizer, CHAT)
    text, finish, n = expected_answer(tokenizer, prompt, 12)
    out = openai_client(server).chat.completions.create(
        model=MODEL.name, messages=CHAT, max_tokens=12, temperature=0)
    assert out.object == "chat.completion"
    assert out.choices[0].message.role == "assistant"
    assert out.choices[0].message.content == text
    assert out.choices[0].finish_reason == finish
    assert (out.usage.prompt_tokens, out.usage.completion_tokens) == (len(prompt), n)
    assert out.usage.total_tokens == len(prompt) + n


def test_chat_stream_equals_hf(server, tokenizer):
    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Name three colors."}]
    prompt = chat_ids(tokenizer, messages)
    text, finish, n = expected_answer(tokenizer, prompt, 12)
    chunks = list(openai_client(server).chat.completions.create(
        model=MODEL.name, messages=messages, max_tokens=12, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    with_choices = [c for c in chunks if c.choices]
    assert "".join(c.choices[0].delta.content or "" for c in with_choices) == text
    assert len(with_choices) > 2, "流式应当一段段到达，而不是一次给完"
    assert [c.choices[0].finish_reason for c in with_choices][-1] == finish
    assert all(c.choices[0].finish_reason is None for c in with_choices[:-1])
    assert chunks[-1].usage.completion_tokens == n and chunks[-1].usage.prompt_tokens == len(prompt)
    assert len({c.id for c in chunks}) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["non_stream", "stream"])
def test_completions_equal_hf(server, tokenizer, stream):
    prompt = "The capital of France is"
    ids = tokenizer.encode(prompt)
    text, finish, n = expected_answer(tokenizer, ids, 6)
    client = openai_client(server)
    if stream:
        chunks = list(client.completions.create(model=MODEL.name, prompt=prompt, max_tokens=6,
                                                temperature=0, stream=True))
        assert all(c.object == "text_completion" for c in chunks)
        assert "".join(c.choices[0].text for c in chunks) == text
        assert chunks[-1].choices[0].finish_reason == finish
    else:
        out = client.completions.create(model=MODEL.name, prompt=prompt, max_tokens=6, temperature=0)
        assert out.choices[0].text == text and out.choices[0].finish_reason == finish
        assert (out.usage.prompt_tokens, out.usage.completion_tokens) == (len(ids), n)


def test_stop_string_and_ignore_eos(server, tokenizer):
    client = openai_client(server)
    prompt = "The capital of France is"
    full, _, _ = expected_answer(tokenizer, tokenizer.encode(prompt), 8)
    stop = full.strip().split()[1]  # 回答里的第二个词：停在它前面，它本身不返回
    out = client.completions.create(model=MODEL.name, prompt=prompt, max_tokens=8, temperature=0,
                                    stop=[stop])
    assert out.choices[0].text == full[: full.index(stop)]
    assert out.choices[0].finish_reason == "stop"
    # ignore_eos（扩展参数）：生成到 EOS 也不停，正好 max_tokens 个
    out = client.chat.completions.create(model=MODEL.name, messages=CHAT, max_tokens=16,
                                         temperature=0, extra_body={"ignore_eos": True})
    assert out.usage.completion_tokens == 16 and out.choices[0].finish_reason == "length"


def test_sampling_params_reach_the_sampler(server):
    """temperature / top_k / top_p 真的传到了采样器：top_k=1 时任何温度都等于贪心。"""
    client = openai_client(server)
    kwargs = dict(model=MODEL.name, prompt="Once upon a time,", max_tokens=6)
    greedy = client.completions.create(temperature=0, **kwargs).choices[0].text
    top1 = client.completions.create(temperature=1.5, top_p=0.9, extra_body={"top_k": 1},
                                     **kwargs).choices[0].text
    assert top1 == greedy
    hot = {client.completions.create(temperature=2.0, **kwargs).choices[0].text for _ in range(3)}
    assert hot != {greedy}, "temperature=2 三次都和贪心一样：温度没有传到采样器"


# ---------------------------------------------------------------- seed、n、logprobs、惩罚


def test_seed_makes_sampling_reproducible(server):
    client = openai_client(server)
    kwargs = dict(model=MODEL.name, prompt="Once upon a time,", max_tokens=10, temperature=1.0)
    a = {client.completions.create(seed=7, **kwargs).choices[0].text for _ in range(2)}
    assert len(a) == 1, a  # 同一个 seed：同样的回答
    others = {client.completions.create(seed=s, **kwargs).choices[0].text for s in (8, 9, 10)}
    assert others - a, "换了 3 个 seed 都和 seed=7 一样：seed 没有传到采样器"
    chat = [client.chat.completions.create(model=MODEL.name, messages=CHAT, max_tokens=10,
                                           temperature=1.0, seed=-3).choices[0].message.content
            for _ in range(2)]
    assert chat[0] == chat[1]


@pytest.mark.parametrize("stream", [False, True], ids=["non_stream", "stream"])
def test_n_choices_with_seed_are_indexed_and_reproducible(server, stream):
    client = openai_client(server)
    kwargs = dict(model=MODEL.name, prompt="My favourite animal is", max_tokens=8, temperature=1.0,
                  seed=11, n=3, extra_body={"ignore_eos": True})
    ref = client.completions.create(**kwargs)
    assert [c.index for c in ref.choices] == [0, 1, 2]
    texts = [c.text for c in ref.choices]
    assert len(set(texts)) > 1, texts  # seed+i：每个回答一串自己的随机数
    assert ref.usage.completion_tokens == 3 * 8  # 提示只算一次，回答的 token 相加
    assert ref.usage.total_tokens == ref.usage.prompt_tokens + 24
    if stream:
        chunks = list(client.completions.create(stream=True, stream_options={"include_usage": True},
                                                **kwargs))
        pieces: dict[int, str] = {}
        for c in chunks:
            for choice in c.choices:
                pieces[choice.index] = pieces.get(choice.index, "") + choice.text
        assert [pieces[i] for i in range(3)] == texts  # 流式按 index 拼起来 = 非流式
        assert chunks[-1].usage.completion_tokens == 24
    else:
        again = client.completions.create(**kwargs)
        assert [c.text for c in again.choices] == texts
    # n 个回答的第一个和单独发的同一个 seed 一样
    single = client.completions.create(**{**kwargs, "n": 1})
    assert single.choices[0].text == texts[0]


def test_n_chat_choices_without_seed_differ(server):
    out = openai_client(server).chat.completions.create(
        model=MODEL.name, messages=CHAT, max_tokens=8, temperature=1.2, n=4)
    assert [c.index for c in out.choices] == [0, 1, 2, 3]
    assert len({c.message.content for c in out.choices}) > 1


def test_n_choices_share_the_prompt_pages(server, tokenizer):
    """n=4 的提示只占一份 KV 页：第 0 个回答算完提示，其余 3 个在前缀缓存里借它的页。

    页在服务器里看不见，所以用接纳来看：4 个回答还在生成时，发一个要很多页的探测请求。
    KV 池放得下“1 份提示 + 4 个回答”再加探测，放不下“4 份提示 + 4 个回答”再加探测（接纳时
    按最坏情况预留页，见第 8 章）。提示的页共用时，探测马上被接纳，它的回复比 4 个回答的大部分
    token 先到；每个回答各占一份提示的页时，探测要等 4 个回答都结束、还回页才能接纳，之后
    不会再有回答的 token。比的是先后，不是时间。
    """
    import random
    import threading

    from minisgl.server.args import ServerArgs

    rng = random.Random(1415)  # 随机的词：不会命中前缀缓存里别的测试留下的内容
    words = "river stone lamp cloud bread violin garden mirror candle forest ladder".split()
    prompt = "Story: " + " ".join(rng.choice(words) for _ in range(50))
    p, n, m = len(tokenizer.encode(prompt)), 4, 64
    shared = (p + m - 1) + (n - 1) * m  # 第 0 个从头算；其余的借来 p-1 个 token，各自再要 m 页
    separate = n * (p + m - 1)  # 每个回答都从头算提示
    # 4 份提示能在同一步算完、同时放进池里：分开算是可能的，这个测试才分得出两种做法
    assert p * n <= ServerArgs.max_extend_tokens and separate < NUM_PAGES
    window = (NUM_PAGES - separate, NUM_PAGES - shared)  # 探测的页数在这之间：共用时放得下，分开时放不下
    probe_words = "north south east west".split()
    probe = "Map:" + "".join(" " + rng.choice(probe_words) for _ in range(sum(window) // 2))
    probe_pages = len(tokenizer.encode(probe))  # 只生成 1 个 token：最坏情况就是提示这么多页（页大小 1）
    assert window[0] < probe_pages <= window[1], (probe_pages, window)

    arrivals: list[float] = []  # 4 个回答的每一块文字到达的时刻
    probe_done: list[float] = []
    probe_reply: list[httpx.Response] = []

    def send_probe() -> None:
        body = {"prompt": probe, "max_tokens": 1, "temperature": 0}
        probe_reply.append(httpx.post(server.url + "/v1/completions", json=body, timeout=300))
        probe_done.append(time.monotonic())

    body = {"prompt": prompt, "n": n, "max_tokens": m, "temperature": 1.0, "seed": 3,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    prober = threading.Thread(target=send_probe)
    usage = None
    with httpx.Client(base_url=server.url, timeout=300) as client:
        with client.stream("POST", "/v1/completions", json=body) as r:
            assert r.status_code == 200  # 响应头到了：4 个回答都已经有了第一段回复
            prober.start()
            for line in r.iter_lines():  # 边到边记，不等整个流读完
                if not line.startswith("data: {"):
                    continue
                event = json.loads(line[6:])
                if event["choices"] and event["choices"][0]["text"]:
                    arrivals.append(time.monotonic())
                usage = event.get("usage") or usage
    prober.join(timeout=300)
    assert probe_reply and probe_reply[0].status_code == 200, probe_reply
    assert probe_reply[0].json()["usage"]["prompt_tokens"] == probe_pages
    assert usage["prompt_tokens"] == p and usage["completion_tokens"] == n * m, usage
    after = sum(t > probe_done[0] for t in arrivals)
    assert after >= n * m // 4, (
        f"探测请求的回复之后只到了 {after} 块回答的文字（共 {len(arrivals)} 块）：它是等 {n} 个回答"
        f"结束、还回页之后才被接纳的，提示的页没有共用")


def hf_logprob_rows(prompt_ids: list[int], generated: list[int]):
    from minibook.hf import hf_logits

    return hf_logits(MODEL, prompt_ids + generated).log_softmax(-1)[len(prompt_ids) - 1:]


def check_entries(tokenizer, entries, generated, ref, k):
    """entries[i] = (token 文字, logprob, [(候选文字, logprob)])，和 HF 的 log_softmax 比。"""
    assert len(entries) == len(generated)
    for i, (token, logprob, top) in enumerate(entries):
        assert token == tokenizer.decode([generated[i]])
        assert logprob == pytest.approx(float(ref[i, generated[i]]), abs=2e-3)
        values, ids = ref[i].topk(k)
        assert [t for t, _ in top] == [tokenizer.decode([j]) for j in ids.tolist()]
        assert [v for _, v in top] == pytest.approx(values.tolist(), abs=2e-3)


@pytest.mark.parametrize("stream", [False, True], ids=["non_stream", "stream"])
def test_chat_logprobs_equal_hf_log_softmax(server, tokenizer, stream):
    prompt = chat_ids(tokenizer, CHAT)
    n = 6
    generated = hf_tokens(prompt, n)
    assert tokenizer.eos_token_id not in generated
    ref = hf_logprob_rows(prompt, generated)
    out = openai_client(server).chat.completions.create(
        model=MODEL.name, messages=CHAT, max_tokens=n, temperature=0, logprobs=True,
        top_logprobs=3, stream=stream)
    if stream:
        content = [e for c in out if c.choices and c.choices[0].logprobs
                   for e in c.choices[0].logprobs.content]
    else:
        content = out.choices[0].logprobs.content
    for e in content:
        assert e.bytes == list(e.token.encode("utf-8", errors="replace"))
    check_entries(tokenizer, [(e.token, e.logprob, [(t.token, t.logprob) for t in e.top_logprobs])
                              for e in content], generated, ref, 3)


@pytest.mark.parametrize("stream", [False, True], ids=["non_stream", "stream"])
def test_completion_logprobs_equal_hf_log_softmax(server, tokenizer, stream):
    prompt = "The capital of France is"
    ids = tokenizer.encode(prompt)
    n = 5
    generated = hf_tokens(ids, n)
    ref = hf_logprob_rows(ids, generated)
    out = openai_client(server).completions.create(model=MODEL.name, prompt=prompt, max_tokens=n,
                                                   temperature=0, logprobs=2, stream=stream)
    tokens, values, tops, offsets, text = [], [], [], [], ""
    for c in (out if stream else [out]):
        lp = c.choices[0].logprobs
        text += c.choices[0].text
        if lp is None:
            continue
        tokens += lp.tokens
        values += lp.token_logprobs
        tops += lp.top_logprobs
        offsets += lp.text_offset
    check_entries(tokenizer, [(t, v, list(top.items())) for t, v, top in zip(tokens, values, tops)],
                  generated, ref, 2)
    assert "".join(tokens) == text
    assert offsets == [len("".join(tokens[:i])) for i in range(len(tokens))]


def test_no_logprobs_unless_asked(server):
    out = openai_client(server).completions.create(model=MODEL.name, prompt="hi", max_tokens=2)
    assert out.choices[0].logprobs is None
    out = openai_client(server).chat.completions.create(model=MODEL.name, messages=CHAT,
                                                        max_tokens=2)
    assert out.choices[0].logprobs is None


def test_penalties_change_the_output(server):
    client = openai_client(server)
    kwargs = dict(model=MODEL.name, prompt="a a a a a a a a a a a a", max_tokens=8, temperature=0,
                  extra_body={"ignore_eos": True})
    plain = client.completions.create(**kwargs).choices[0].text
    freq = client.completions.create(frequency_penalty=2.0, **kwargs).choices[0].text
    pres = client.completions.create(presence_penalty=2.0, **kwargs).choices[0].text
    assert freq != plain and pres != plain, (plain, freq, pres)
    assert client.completions.create(frequency_penalty=0.0, **kwargs).choices[0].text == plain


def test_skip_special_tokens_like_vllm(server, tokenizer):
    """默认（vLLM 的 True）回答里没有特殊 token；ignore_eos 生成过 EOS 之后，False 时看得到它。"""
    prompt = chat_ids(tokenizer, CHAT)
    ref = hf_tokens(prompt, 24)
    assert tokenizer.eos_token_id in ref  # 这个问题的贪心回答在 24 个 token 内结束
    client = openai_client(server)
    texts = {}
    for skip in (True, False):
        out = client.chat.completions.create(
            model=MODEL.name, messages=CHAT, max_tokens=24, temperature=0,
            extra_body={"ignore_eos": True, "skip_special_tokens": skip})
        texts[skip] = out.choices[0].message.content
    assert texts[False] == tokenizer.decode(ref)
    assert texts[True] == tokenizer.decode(ref, skip_special_tokens=True)
    assert tokenizer.eos_token in texts[False] and tokenizer.eos_token not in texts[True]


def test_harmless_fields_are_accepted_and_unknown_model_is_404(server):
    from openai import NotFoundError

    client = openai_client(server)
    out = client.chat.completions.create(model=MODEL.name, messages=CHAT, max_tokens=2,
                                         store=False, metadata={"team": "book"},
                                         service_tier="auto", user="u")
    assert out.usage.completion_tokens == 2
    with pytest.raises(NotFoundError) as info:
        client.chat.completions.create(model="gpt-4o", messages=CHAT, max_tokens=2)
    assert info.value.body["code"] == "model_not_found"
    r = httpx.post(server.url + "/v1/completions", json={"prompt": "hi", "model": "nope"},
                   timeout=60)
    assert r.status_code == 404 and r.json()["error"]["param"] == "model", r.text


# ---------------------------------------------------------------- 坏请求：4xx + OpenAI 错误体


BAD_REQUESTS = {
    "bad_json": ("/v1/chat/completions", b'{"messages": [', "JSON"),
    "wrong_type": ("/v1/chat/completions", {"messages": CHAT, "max_tokens": "ten"}, "max_tokens"),
    "negative_max_tokens": ("/v1/completions", {"prompt": "hi", "max_tokens": -5}, "max_tokens"),
    "unknown_field": ("/v1/completions", {"prompt": "hi", "frobnicate": True}, "frobnicate"),
    "empty_messages": ("/v1/chat/completions", {"messages": []}, "messages"),
    "bad_role": ("/v1/chat/completions", {"messages": [{"role": "robot", "content": "x"}]}, "messages"),
    "missing_prompt": ("/v1/completions", {"max_tokens": 3}, "prompt"),
    "temperature_too_high": ("/v1/completions", {"prompt": "hi", "temperature": 5}, "temperature"),
    "top_k_zero": ("/v1/completions", {"prompt": "hi", "top_k": 0}, "top_k"),
    "n_zero": ("/v1/completions", {"prompt": "hi", "n": 0}, "n"),
    "n_too_many": ("/v1/completions", {"prompt": "hi", "n": 17}, "n"),
    "empty_prompt": ("/v1/completions", {"prompt": ""}, "空"),
    "prompt_too_long": ("/v1/completions", {"prompt": "hello " * NUM_PAGES, "max_tokens": 4},
                        "prompt"),
    "prompt_too_long_stream": ("/v1/chat/completions", {"messages": [
        {"role": "user", "content": "hello " * NUM_PAGES}], "stream": True}, "messages"),
    "lone_surrogate_content": ("/v1/chat/completions",
                               b'{"messages": [{"role": "user", "content": "hi \\ud800"}]}',
                               "messages.0.content"),
    "lone_surrogate_stop": ("/v1/completions", b'{"prompt": "hi", "stop": "\\udc00"}', "stop"),
    "invalid_utf8": ("/v1/completions", b'{"prompt": "hi \xff\xfe"}', "请求体不是合法的 UTF-8"),
    "huge_max_tokens": ("/v1/completions", {"prompt": "hi", "max_tokens": 10**20}, "max_tokens"),
    "huge_top_k": ("/v1/completions", {"prompt": "hi", "top_k": 10**20}, "top_k"),
    "presence_penalty_too_big": ("/v1/chat/completions", {"messages": CHAT,
                                                          "presence_penalty": 2.5},
                                 "presence_penalty"),
    "frequency_penalty_string": ("/v1/completions", {"prompt": "hi", "frequency_penalty": "1"},
                                 "frequency_penalty"),
    "seed_too_big": ("/v1/completions", {"prompt": "hi", "seed": 2**63}, "seed"),
    "seed_float": ("/v1/completions", {"prompt": "hi", "seed": 1.5}, "seed"),
    "top_logprobs_without_logprobs": ("/v1/chat/completions", {"messages": CHAT, "top_logprobs": 2},
                                      "top_logprobs"),
    "top_logprobs_too_many": ("/v1/chat/completions", {"messages": CHAT, "logprobs": True,
                                                       "top_logprobs": 21}, "top_logprobs"),
    "completion_logprobs_bool": ("/v1/completions", {"prompt": "hi", "logprobs": True},
                                 "logprobs"),
    "echo": ("/v1/completions", {"prompt": "hi", "echo": True}, "echo"),
    "stream_options_without_stream": ("/v1/completions", {
        "prompt": "hi", "stream_options": {"include_usage": True}}, "stream_options"),
    "two_prompts": ("/v1/completions", {"prompt": ["a", "b"]}, "prompt"),
    "image_part": ("/v1/chat/completions", {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "x"}}]}]}, "messages.0.content"),
}


@pytest.mark.parametrize("name", list(BAD_REQUESTS))
def test_bad_request_gets_openai_error(server, name):
    path, body, hint = BAD_REQUESTS[name]
    if isinstance(body, bytes):
        r = httpx.post(server.url + path, content=body,
                       headers={"content-type": "application/json"}, timeout=60)
    else:
        r = httpx.post(server.url + path, json=body, timeout=60)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert hint in error["message"] or hint == error["param"], error
    if name.startswith("prompt_too_long"):  # 像 OpenAI：点名字段、给 code，不露内部的 uid
        assert (error["param"], error["code"]) == (hint, "context_length_exceeded"), error
        assert "请求 " not in error["message"], error


def test_body_over_limit_gets_413_and_server_keeps_serving(server):
    big = b'{"prompt": "' + b"a" * (5 * 2**20) + b'"}'
    r = httpx.post(server.url + "/v1/completions", content=big,
                   headers={"content-type": "application/json"}, timeout=60)
    assert r.status_code == 413 and "MiB" in r.json()["error"]["message"], r.text

    def chunks():  # 分块传输：没有 Content-Length，边收边数
        for _ in range(5):
            yield b" " * 2**20
    r = httpx.post(server.url + "/v1/completions", content=chunks(),
                   headers={"content-type": "application/json"}, timeout=60)
    assert r.status_code == 413 and "MiB" in r.json()["error"]["message"], r.text
    # 没超过体积上限、但字符数一看就放不下的提示：在 tokenizer 进程里分词之前就拒绝
    r = httpx.post(server.url + "/v1/completions", json={"prompt": "hello " * 500_000}, timeout=60)
    assert r.status_code == 400 and "个字符" in r.json()["error"]["message"], r.text
    assert r.json()["error"]["code"] == "context_length_exceeded"


def test_default_max_tokens_is_the_room_left(server):
    """不给 max_tokens：默认"能生成多少就多少"（= max_seq_len，tokenizer 进程截到剩下的空间）。

    以前的默认值（max_seq_len 的一半）让一半长度以上的提示被拒；截短的算术见
    test_tokenizer_rejects_long_prompts_early_and_cuts_max_tokens。这里 stop 让回答几步就停，省时间。
    """
    r = httpx.post(server.url + "/v1/chat/completions",
                   json={"messages": CHAT, "temperature": 0, "stop": [" "]}, timeout=60)
    assert r.status_code == 200, r.text  # 没有截短的话：提示 + max_tokens 1024 > 1024，400
    assert r.json()["choices"][0]["finish_reason"] == "stop"


def test_openai_optional_fields_null_and_neutral_values_accepted(server):
    body = {"messages": [{"role": "developer", "content": "Be brief."},
                         {"role": "user", "content": "hi", "name": "ann"},
                         {"role": "assistant", "content": None},
                         {"role": "user", "content": "Say hi."}],
            "temperature": None, "top_p": None, "stream": None, "stop": None, "max_tokens": None,
            "max_completion_tokens": 2, "presence_penalty": 0, "frequency_penalty": 0,
            "logprobs": False, "n": 1, "user": "u", "seed": None}
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 2, r.text
    r2 = httpx.post(server.url + "/v1/completions", json={"prompt": ["hi"], "max_tokens": 2,
                                                         "echo": False}, timeout=60)
    assert r2.status_code == 200, r2.text
    assert re.fullmatch(r"chatcmpl-[0-9a-f]{32}", r.json()["id"]), r.json()["id"]  # 重启也不会重复
    # include_usage：最后一块带 usage，之前的每一块都有 "usage": null
    body = {"prompt": "hi", "max_tokens": 3, "stream": True, "stream_options": {"include_usage": True}}
    r = httpx.post(server.url + "/v1/completions", json=body, timeout=60)
    chunks = [json.loads(x[6:]) for x in r.text.splitlines() if x.startswith("data: {")]
    assert chunks[-1]["usage"]["completion_tokens"] == 3
    assert all("usage" in c and c["usage"] is None for c in chunks[:-1]), chunks
    card = openai_client(server).models.retrieve(MODEL.name)
    assert card.id == MODEL.name
    assert httpx.get(server.url + "/v1/models/nope", timeout=10).status_code == 404


def test_unknown_route_and_method(server):
    r = httpx.get(server.url + "/v1/nothing", timeout=10)
    assert r.status_code == 404 and "error" in r.json()
    r = httpx.get(server.url + "/v1/completions", timeout=10)
    assert r.status_code == 405 and "error" in r.json()


def test_openai_client_raises_on_bad_request(server):
    import openai

    with pytest.raises(openai.BadRequestError) as info:
        openai_client(server).completions.create(model=MODEL.name, prompt="hi", max_tokens=0)
    assert info.value.status_code == 400
    # 坏请求之后服务器照常服务
    ok = openai_client(server).completions.create(model=MODEL.name, prompt="hi", max_tokens=2)
    assert ok.usage.completion_tokens >= 1


# ---------------------------------------------------------------- 100 个并发请求


def test_100_concurrent_requests_all_correct(server, tokenizer):
    countries = ["France", "Spain", "Italy", "Germany", "Japan", "China", "Russia", "Egypt",
                 "Canada", "Greece"]
    prompts = [f"The capital of {c} is" for c in countries]  # 10 个答案各不相同的提示，各 10 份
    expected = {p: expected_answer(tokenizer, tokenizer.encode(p), 4)[0] for p in prompts}
    order = [prompts[i % len(prompts)] for i in range(100)]
    assert len(set(expected.values())) == len(prompts), expected

    async def one(client: httpx.AsyncClient, prompt: str, stream: bool) -> str:
        body = {"prompt": prompt, "max_tokens": 4, "temperature": 0, "stream": stream}
        if not stream:
            r = await client.post("/v1/completions", json=body)
            assert r.status_code == 200, r.text
            return r.json()["choices"][0]["text"]
        pieces = []
        async with client.stream("POST", "/v1/completions", json=body) as r:
            assert r.status_code == 200
            async for line in r.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    pieces.append(json.loads(line[6:])["choices"][0]["text"])
        return "".join(pieces)

    async def main() -> list[str]:
        limits = httpx.Limits(max_connections=100)
        async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as client:
            return await asyncio.gather(*(one(client, p, i % 2 == 1) for i, p in enumerate(order)))

    answers = asyncio.run(main())
    assert len(answers) == 100
    wrong = [(i, p, a) for i, (p, a) in enumerate(zip(order, answers)) if a != expected[p]]
    assert not wrong, f"{len(wrong)} 个请求拿到了不是自己的答案，例如 {wrong[:3]}"


# ---------------------------------------------------------------- 断开的客户端：请求取消，页还回来


def test_client_disconnect_aborts_and_pages_come_back(server):
    start = len(server.log())
    body = {"messages": CHAT, "max_tokens": 900, "temperature": 0, "stream": True,
            "ignore_eos": True}  # 不取消的话要生成 900 个 token
    with httpx.Client(base_url=server.url, timeout=60) as client:
        with client.stream("POST", "/v1/chat/completions", json=body) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            events = [line for _, line in zip(range(10), (x for x in lines if x))]
    assert len(events) == 10  # 读了 10 个事件就断开
    # API server 发出取消，调度器真的把这个请求拿掉了（不是生成完 900 个 token 才结束）……
    uid = int(server.wait_for_log(r"客户端断开，取消请求 (\d+)", start).group(1))
    aborted = server.wait_for_log(rf"请求 {uid} 已取消", start)
    # ……之后调度器空闲，KV 页核对通过：空闲页 + 前缀缓存页 = 总页数，一页不少
    check = server.wait_for_log(r"KV 页核对通过\D*(\d+)\D+(\d+)\D+(\d+)", start + aborted.end())
    free, cached, total = map(int, check.groups())
    assert free + cached == total == NUM_PAGES
    # 一个需要几乎全部页的请求也能接纳：取消的请求占的页确实还回来了（缓存的页可以逐出）
    big = {"prompt": "hello", "max_tokens": NUM_PAGES - 8, "temperature": 0, "ignore_eos": True,
           "stream": True}
    with httpx.Client(base_url=server.url, timeout=60) as client:
        with client.stream("POST", "/v1/completions", json=big) as r:
            assert r.status_code == 200
            assert len([line for _, line in zip(range(4), (x for x in r.iter_lines() if x))]) == 4


def test_non_stream_client_that_times_out_is_cancelled_while_tokens_flow(server):
    """非流式的客户端超时走了（openai 的 timeout，再重试一次）：两次尝试的生成都被取消。

    生成期间回复一段段地来（只是不发给客户端），所以不能只在"一阵子没有回复"时才去看连接。
    """
    import openai
    from openai import OpenAI

    start = len(server.log())
    client = OpenAI(base_url=f"{server.url}/v1", api_key="unused", timeout=3, max_retries=1)
    with pytest.raises(openai.APITimeoutError):  # 不取消的话要生成 ~1000 个 token，远超 3 秒
        client.completions.create(model=MODEL.name, prompt="Once upon a time", temperature=0,
                                  max_tokens=NUM_PAGES - 16, extra_body={"ignore_eos": True})
    deadline = time.monotonic() + 60  # 防挂死，不是计时断言
    while len(uids := re.findall(r"客户端断开，取消请求 (\d+)", server.log()[start:])) < 2:
        assert time.monotonic() < deadline, f"没有取消两次尝试的请求：\n{server.log()[start:][-3000:]}"
        time.sleep(0.1)
    for uid in uids:  # 调度器真的拿掉了它们，而不是生成完才结束
        server.wait_for_log(rf"请求 {uid} 已取消", start)
    check = server.wait_for_log(r"KV 页核对通过\D*(\d+)\D+(\d+)\D+(\d+)",
                                start + server.log()[start:].rindex("已取消"))
    free, cached, total = map(int, check.groups())
    assert free + cached == total == NUM_PAGES


# ---------------------------------------------------------------- 后端死了：立刻 5xx；SIGTERM：全部退出


def test_sigterm_stops_every_child_and_frees_port(server):
    children = descendants(server.proc.pid)
    ipc_dir = re.search(r"ZMQ 地址放在 (\S+)（", server.log()).group(1)
    assert Path(ipc_dir).is_dir()
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(timeout=30)
    assert children, "找不到服务器的子进程"
    deadline = time.monotonic() + 10  # 孙进程（multiprocessing 的 resource tracker）稍后才退
    while any(alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in children if alive(pid)], "SIGTERM 之后还有子进程活着"
    assert "API server 已停止" in server.log() and "Traceback" not in server.log(), server.log()[-3000:]
    assert not Path(ipc_dir).exists(), "IPC 临时目录没有删掉"
    with socket.socket() as s:  # 端口空出来了：新的服务器能在上面监听（TIME_WAIT 的连接不算占用）
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", server.port))
        s.listen()


def read_sse(r: httpx.Response) -> list[dict]:
    return [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]


def test_dead_scheduler_fails_waiters_with_5xx_then_the_server_exits(tmp_path):
    """调度器死了：在等的请求立刻得到 503（不挂住），然后服务器以退出码 1 退出，不留进程和 IPC 目录。

    像 vLLM、SGLang 那样退出，而不是一直开着、对什么请求都回 503：外面的人（systemd、k8s）才知道要重启它。
    """
    server = start_server(tmp_path / "server.log")
    family = descendants(server.proc.pid)
    try:
        ipc_dir = re.search(r"ZMQ 地址放在 (\S+)（", server.log()).group(1)
        pid = int(re.search(r"已启动调度器 rank 0（pid (\d+)）", server.log()).group(1))
        body = {"prompt": "Once upon a time", "max_tokens": NUM_PAGES - 16, "temperature": 0,
                "ignore_eos": True, "stream": True}
        # 超时给得很宽：挂住的请求会在这里失败（没有 error 事件就是超时），而不是断言一个时间
        with httpx.Client(base_url=server.url, timeout=60) as client:
            with client.stream("POST", "/v1/completions", json=body) as r:
                assert r.status_code == 200
                lines = r.iter_lines()
                next(x for x in lines if x.startswith("data: {"))  # 已经在生成了
                os.kill(pid, signal.SIGKILL)
                events = [json.loads(x[6:]) for x in lines if x.startswith("data: {")]
        assert "error" in events[-1] and "调度器" in events[-1]["error"]["message"], events[-3:]
        server.proc.wait(timeout=60)
        assert server.proc.returncode == 1, server.log()[-3000:]
        assert re.search(rf"错误：调度器 rank 0（pid {pid}）意外退出.*服务器退出", server.log()), \
            server.log()[-3000:]
        assert not wait_until_gone(family), "服务器退出之后还有子进程活着"
        assert not Path(ipc_dir).exists(), "IPC 临时目录没有删掉"
    finally:
        stop_server(server, family)


def test_dead_tokenizer_fails_waiters_then_the_server_exits(tmp_path):
    """tokenizer 进程死了也一样：在生成的流拿到 error 事件（不挂住），服务器以退出码 1 退出，不留进程和 IPC 目录。"""
    server = start_server(tmp_path / "server.log")
    family = descendants(server.proc.pid)
    try:
        ipc_dir = re.search(r"ZMQ 地址放在 (\S+)（", server.log()).group(1)
        pid = int(re.search(r"已启动 tokenizer 进程（pid (\d+)）", server.log()).group(1))
        body = {"prompt": "Once upon a time", "max_tokens": NUM_PAGES - 16, "temperature": 0,
                "ignore_eos": True, "stream": True}
        with httpx.Client(base_url=server.url, timeout=60) as client:  # 宽的超时只防挂死
            with client.stream("POST", "/v1/completions", json=body) as r:
                assert r.status_code == 200
                lines = r.iter_lines()
                next(x for x in lines if x.startswith("data: {"))
                os.kill(pid, signal.SIGKILL)
                events = [json.loads(x[6:]) for x in lines if x.startswith("data: {")]
        assert "error" in events[-1] and "tokenizer" in events[-1]["error"]["message"], events[-3:]
        server.proc.wait(timeout=60)
        assert server.proc.returncode == 1, server.log()[-3000:]
        assert re.search(rf"错误：tokenizer 进程（pid {pid}）意外退出.*服务器退出", server.log()), \
            server.log()[-3000:]
        assert not wait_until_gone(family), "服务器退出之后还有子进程活着"
        assert not Path(ipc_dir).exists(), "IPC 临时目录没有删掉"
    finally:
        stop_server(server, family)


def test_a_taken_port_is_a_chinese_error_before_anything_starts():
    """端口被占：先于加载模型、起子进程就报一句中文错误，退出码 1。"""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "minisgl", "--model-path", str(MODEL), "--port", str(port)],
                              capture_output=True, text=True, timeout=STARTUP_DEADLINE,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert f"错误：127.0.0.1:{port} 用不了" in proc.stderr and "--port" in proc.stderr, proc.stderr[-2000:]
    assert "已启动" not in proc.stderr, proc.stderr[-2000:]


def test_killed_launcher_holds_port_while_loading_and_children_clean_up(tmp_path):
    """启动器在加载模型之前就占住端口；启动器被 kill -9（来不及收尾）：子进程跟着退出，并删掉 IPC 目录。"""
    server = start_server(tmp_path / "server.log", wait_ready=False)
    family: set[int] = set()
    try:
        server.wait_for_log(r"已启动调度器 rank 0", timeout=STARTUP_DEADLINE)
        with socket.socket() as s:  # 加载期间别的程序占不走这个端口（uvicorn 到时就不会绑定失败）
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with pytest.raises(OSError):
                s.bind(("127.0.0.1", server.port))
                s.listen()
        wait_until_ready(server)
        ipc_dir = re.search(r"ZMQ 地址放在 (\S+)（", server.log()).group(1)
        family = descendants(server.proc.pid)
        assert family and Path(ipc_dir).is_dir()
        server.proc.kill()
        server.proc.wait(timeout=30)
        assert not wait_until_gone(family), "启动器被 kill -9 之后还有子进程活着"
        deadline = time.monotonic() + 30  # 防挂死的上限
        while Path(ipc_dir).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not Path(ipc_dir).exists(), "启动器被 kill -9 之后 IPC 目录还在"
    finally:
        stop_server(server, family)


def test_pool_too_small_for_the_chat_template_is_a_startup_error():
    """KV 池小到连聊天模板加一句问话都放不下：启动时就报错退出，而不是起来之后拒绝每个对话。"""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "minisgl", "--model-path", str(MODEL),
                             "--num-pages", "16", "--port", str(free_port())],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        _, err = proc.communicate(timeout=STARTUP_DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, err[-2000:]
    assert re.search(r"错误：.*最多 16 个 token.*聊天模板.*--num-pages", err), err[-2000:]
    pids = [int(p) for p in re.findall(r"已启动.+?（pid (\d+)）", err)]
    assert len(pids) == 2 and not wait_until_gone(set(pids))


# ---------------------------------------------------------------- 长提示不卡住别的流；卡住的后端


@pytest.fixture(scope="module")
def chunky_server(tmp_path_factory) -> Server:
    """块很小（32 个 token）、看守 10 秒的服务器：长提示切成很多块；最后被 SIGSTOP 弄坏。"""
    server = start_server(tmp_path_factory.mktemp("ch15-chunky") / "server.log",
                          "--max-prefill-length", "32", "--watchdog-timeout", "10")
    family = descendants(server.proc.pid)
    try:
        yield server
    finally:
        stop_server(server, family)


def test_running_streams_decode_between_the_chunks_of_a_long_prompt(chunky_server):
    """服务的默认设置：长提示的两块之间，在跑的请求走一步 decode（看 token 到达，不计时）。

    约 900 个 token 的提示切成约 28 块。块接着块算的话（上游的顺序），这期间流里一个 token 也没有；
    两块之间 decode 一步，就有二十几个。
    """
    import random
    import threading

    server = chunky_server
    arrivals: list[float] = []
    started = threading.Event()
    body = {"prompt": "Once upon a time", "max_tokens": 120, "temperature": 0,
            "ignore_eos": True, "stream": True}

    def stream() -> None:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            with client.stream("POST", "/v1/completions", json=body) as r:
                for line in r.iter_lines():
                    if line.startswith("data: {"):
                        arrivals.append(time.monotonic())
                        started.set()

    reader = threading.Thread(target=stream)
    reader.start()
    try:
        assert started.wait(60)
        rng = random.Random(15)  # 随机的词：不会命中前缀缓存
        words = "time year people way day man thing woman life child world school state".split()
        prompt = " ".join(rng.choice(words) for _ in range(900))
        sent = time.monotonic()
        r = httpx.post(server.url + "/v1/completions", json={"prompt": prompt, "max_tokens": 1},
                       timeout=120)
        done = time.monotonic()
        assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] > 800, r.text
    finally:
        reader.join(timeout=120)
    during = sum(sent < t < done for t in arrivals)
    assert during >= 10, f"长提示 prefill 期间流里只到了 {during} 个 token：块之间没有 decode"


def test_stopped_scheduler_makes_health_503_and_waiters_fail_then_exits(chunky_server):
    """调度器被 SIGSTOP（进程还在，只是不动了）：看守线程发现不了。

    有请求在等、后端 --watchdog-timeout 秒没有任何回复，就当它卡住了：/health 的探测请求
    和正在流式生成的请求都得到错误，然后服务器以退出码 1 退出，不留进程。
    """
    import threading

    server = chunky_server
    family = descendants(server.proc.pid)
    assert httpx.get(server.url + "/health", timeout=60).status_code == 200
    pid = int(re.search(r"已启动调度器 rank 0（pid (\d+)）", server.log()).group(1))
    health: list[httpx.Response] = []
    body = {"prompt": "Once upon a time", "max_tokens": NUM_PAGES - 16, "temperature": 0,
            "ignore_eos": True, "stream": True}
    with httpx.Client(base_url=server.url, timeout=120) as client:
        with client.stream("POST", "/v1/completions", json=body) as r:
            lines = r.iter_lines()
            next(x for x in lines if x.startswith("data: {"))  # 已经在生成了
            os.kill(pid, signal.SIGSTOP)
            probe = threading.Thread(target=lambda: health.append(
                httpx.get(server.url + "/health", timeout=120)))
            probe.start()
            events = [json.loads(x[6:]) for x in lines if x.startswith("data: {")]
            probe.join(timeout=120)
    assert "error" in events[-1] and "没有任何回复" in events[-1]["error"]["message"], events[-3:]
    assert health and health[0].status_code == 503 and "没有任何回复" in health[0].text
    server.proc.wait(timeout=60)
    assert server.proc.returncode == 1, server.log()[-3000:]
    assert re.search(r"错误：.*秒没有任何回复.*服务器退出", server.log()), server.log()[-3000:]
    assert not wait_until_gone(family), "服务器退出之后还有子进程活着（被 SIGSTOP 的调度器也要结束）"


def test_child_dying_at_startup_is_a_clear_error(tmp_path):
    """子进程还没就绪就死了（这里：模型目录里的 config.json 是坏的）：一行中文错误，退出码 1，不留子进程。"""
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "minisgl", "--model-path", str(broken),
                             "--port", str(free_port())], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err[-2000:]
    assert re.search(r"错误：(调度器 rank 0|tokenizer 进程)（pid \d+）还没就绪就退出了，退出码 1", err), err[-2000:]
    pids = [int(p) for p in re.findall(r"已启动.+?（pid (\d+)）", err)]
    assert len(pids) == 2 and not [pid for pid in pids if alive(pid)]
    ipc_dir = re.search(r"ZMQ 地址放在 (\S+)（", err).group(1)
    assert not Path(ipc_dir).exists()


# ---------------------------------------------------------------- 不起进程：FrontendManager 与 shell 的逻辑


class FakeTokenizerProcess:
    """代替 tokenizer 进程 + 调度器：收到 TokenizeMsg，就把"第 n 轮"的回答分两段推回来。"""

    def __init__(self) -> None:
        self.sent: list = []
        self.replies: asyncio.Queue = asyncio.Queue()
        self.silent = False  # True：收下请求但不回复（像一个卡住的后端）

    async def put(self, msg) -> None:  # FrontendManager.send
        from minisgl.message import BatchFrontendMsg, TokenizeMsg, UserReply

        self.sent.append(msg)
        if isinstance(msg, TokenizeMsg) and not self.silent:
            turn = sum(m["role"] == "user" for m in msg.text)
            self.replies.put_nowait(UserReply(msg.uid, f"第 {turn} ", False))
            self.replies.put_nowait(BatchFrontendMsg([UserReply(
                msg.uid, "轮的回答", True, "stop", prompt_tokens=7 * turn, completion_tokens=3)]))

    async def get(self):  # FrontendManager.recv
        return await self.replies.get()

    def stop(self) -> None:
        pass


def test_shell_multi_turn_reset_and_exit(monkeypatch, capsys):
    from minisgl.message import TokenizeMsg
    from minisgl.server.frontend import FrontendManager, ServedModel
    from minisgl.server.shell import run_shell

    fake = FakeTokenizerProcess()
    lines = "你好\n再说一遍\n/reset\n又一次\n/exit\n不该读到这一行\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines))
    model = ServedModel("fake", "/fake", max_seq_len=512)
    asyncio.run(run_shell(lambda: FrontendManager(fake, fake), model))
    out = capsys.readouterr().out
    asked = [m.text for m in fake.sent if isinstance(m, TokenizeMsg)]
    assert len(asked) == 3  # /exit 之后的行没有读
    # 第二轮带着第一轮的问答；/reset 之后历史清空
    assert asked[1] == [{"role": "user", "content": "你好"},
                        {"role": "assistant", "content": "第 1 轮的回答"},
                        {"role": "user", "content": "再说一遍"}]
    assert asked[2] == [{"role": "user", "content": "又一次"}]
    assert out.count("第 1 轮的回答") == 2 and "第 2 轮的回答" in out and "[历史已清空]" in out
    assert "首个 token" in out


def test_frontend_routes_replies_aborts_and_fails_fast():
    from minisgl.core import SamplingParams
    from minisgl.message import AbortMsg
    from minisgl.server.frontend import BackendUnavailable, FrontendManager

    async def scenario():
        fake = FakeTokenizerProcess()
        frontend = FrontendManager(fake, fake)
        frontend.start()
        a = await frontend.submit([{"role": "user", "content": "a"}], SamplingParams(), [])
        b = await frontend.submit([{"role": "user", "content": "b"}], SamplingParams(), [])
        assert (await frontend.next_reply(b)).uid == b  # 回复按 uid 分给各自的等待者
        frontend.abort(b)  # 客户端断开：发 AbortMsg，之后 b 的回复直接丢掉
        await asyncio.sleep(0.01)
        assert any(isinstance(m, AbortMsg) and m.uid == b for m in fake.sent)
        first = await frontend.next_reply(a)
        assert (await frontend.next_reply(a)).finished
        fake.silent = True
        c = await frontend.submit("c", SamplingParams(), [])
        waiting = asyncio.ensure_future(frontend.next_reply(c))
        await asyncio.sleep(0.01)
        frontend.backend_died("调度器 rank 0 意外退出")  # 等待中的请求立刻失败
        with pytest.raises(BackendUnavailable):
            await waiting
        with pytest.raises(BackendUnavailable):  # 新请求也立刻失败，不会挂住
            await frontend.submit("x", SamplingParams(), [])
        await frontend.shutdown()
        return first

    assert asyncio.run(scenario()).incremental_output == "第 1 "


def test_flags_map_to_server_args_and_errors_are_chinese(capsys):
    from minisgl.server.args import parse_args

    args = parse_args(["--model", str(MODEL), "--tp-size", "3", "--num-pages", "64", "--page-size", "4",
                       "--max-running-requests", "5", "--cache-type", "naive",
                       "--max-prefill-length", "128", "--host", "0.0.0.0", "--port", "8000"])
    assert (args.tp_info.rank, args.tp_info.size) == (0, 3)  # 每个 rank 的 rank 由启动器改
    assert (args.num_page_override, args.page_size, args.max_running_req) == (64, 4, 5)
    assert (args.cache_type, args.max_extend_tokens) == ("naive", 128)
    assert (args.server_host, args.server_port, args.shell_mode) == ("0.0.0.0", 8000, False)
    # 服务的默认：长提示切成小块，两块之间让在跑的请求 decode 一步（离线的 LLM 照旧是上游的顺序）
    default = parse_args(["--model-path", str(MODEL)])
    assert (default.decode_between_chunks, default.max_extend_tokens) == (True, 256)
    assert default.watchdog_timeout == 60
    off = parse_args(["--model-path", str(MODEL), "--no-decode-between-chunks", "--watchdog-timeout", "5"])
    assert (off.decode_between_chunks, off.watchdog_timeout) == (False, 5)
    assert parse_args(["--model-path", str(MODEL), "--shell-mode"]).max_running_req == 1
    for argv, words in [(["--port", "abc"], "整数"), (["--port", "70000"], "1–65535"),
                        (["--cache-type", "lru"], "不能取"), (["--bogus"], "不认识的参数"),
                        (["--model-path", "/nonexistent"], "config.json"),
                        (["--model-path", str(MODEL), "--memory-ratio", "2"], "memory_ratio"),
                        (["--watchdog-timeout", "0"], "> 0")]:
        with pytest.raises(SystemExit) as info:
            parse_args(argv)
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert "错误：" in err and words in err, err


def test_drain_fails_waiters_after_the_grace_period_and_refuses_new_requests():
    from minisgl.core import SamplingParams
    from minisgl.server.frontend import BackendUnavailable, FrontendManager

    async def scenario():
        fake = FakeTokenizerProcess()
        fake.silent = True
        frontend = FrontendManager(fake, fake)
        frontend.start()
        uid = await frontend.submit("a", SamplingParams(), [])
        waiting = asyncio.ensure_future(frontend.next_reply(uid))
        frontend.drain(0.05)  # 停服务：正在等的请求最多再等 0.05 秒
        with pytest.raises(BackendUnavailable, match="正在停止"):
            await frontend.submit("b", SamplingParams(), [])  # 新请求立刻被拒
        await asyncio.sleep(0)
        assert not waiting.done()  # 宽限期内还在等
        with pytest.raises(BackendUnavailable, match="正在停止"):
            await asyncio.wait_for(waiting, timeout=30)  # 防挂死，不是计时断言
        await frontend.shutdown()

    asyncio.run(scenario())


def test_submit_that_fails_to_send_leaves_no_queue_behind():
    from minisgl.core import SamplingParams
    from minisgl.server.frontend import FrontendManager

    class Broken(FakeTokenizerProcess):
        async def put(self, msg) -> None:
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    async def scenario():
        frontend = FrontendManager(Broken(), Broken())
        with pytest.raises(UnicodeEncodeError):
            await frontend.submit("x", SamplingParams(), [])
        return frontend.reply_queues

    assert asyncio.run(scenario()) == {}


def test_tokenizer_rejects_long_prompts_early_and_cuts_max_tokens(tokenizer, monkeypatch):
    from minisgl.core import SamplingParams
    from minisgl.message import TokenizeMsg, UserMsg
    from minisgl.tokenizer.server import PromptTooLong, TokenizerHandler

    handler = TokenizerHandler(tokenizer, max_seq_len=32)
    fits = TokenizeMsg(0, "The capital of France is", SamplingParams(max_tokens=1000), [])
    n = len(tokenizer.encode(fits.text))
    to_backend, replies = handler.handle([fits])
    assert replies == [] and isinstance(to_backend[0], UserMsg)
    assert to_backend[0].sampling_params.max_tokens == 32 - n  # 截到剩下的空间
    tokenized = []
    original = handler.tokenize_manager.tokenize
    monkeypatch.setattr(handler.tokenize_manager, "tokenize",
                        lambda msgs: tokenized.append(msgs) or original(msgs))
    huge = TokenizeMsg(1, "a" * (32 * handler.max_token_chars + 1), SamplingParams(), [])
    just_too_long = TokenizeMsg(2, " hello" * 40, SamplingParams(), [])
    to_backend, replies = handler.handle([huge, just_too_long])
    assert to_backend == [] and [r.uid for r in replies] == [1, 2]
    assert all(r.finish_reason == "error" and r.error_code == PromptTooLong.code for r in replies)
    assert [m.uid for msgs in tokenized for m in msgs] == [2]  # 超长的那个根本没有分词
    # 字符数没到"一定放不下"（一个 token 按最长的约 80 个字符算），但开头一截的 token 就已经太多：
    # 不分完整段就拒绝（以前 8 个 60 万字符的提示要分好几秒，这期间每个流都在等）
    tokenized.clear()
    wordy = " hello" * (32 * handler.max_token_chars // 6)
    chat = [{"role": "user", "content": wordy}]
    to_backend, replies = handler.handle([TokenizeMsg(3, wordy, SamplingParams(), []),
                                          TokenizeMsg(4, chat, SamplingParams(), [])])
    assert to_backend == [] and [r.uid for r in replies] == [3, 4]
    assert all(r.error_code == PromptTooLong.code for r in replies), replies
    assert tokenized == []
    # 开头一截还放得下的正常提示照常分词，不被误杀
    to_backend, replies = handler.handle([TokenizeMsg(5, " hello" * 20, SamplingParams(), [])])
    assert replies == [] and [m.uid for m in to_backend] == [5]


def test_tokenizer_refuses_to_start_when_the_chat_template_does_not_fit(tokenizer):
    from minisgl.tokenizer.server import TokenizerHandler

    need = len(chat_ids(tokenizer, [{"role": "user", "content": "hi"}]))
    assert "聊天模板" in TokenizerHandler(tokenizer, max_seq_len=need).startup_problem()
    assert TokenizerHandler(tokenizer, max_seq_len=need + 1).startup_problem() is None
    assert TokenizerHandler(tokenizer).startup_problem() is None  # 不知道 max_seq_len：不检查


def test_shell_drops_oldest_turns_when_the_chat_gets_too_long(monkeypatch, capsys):
    from minisgl.message import TokenizeMsg, UserReply
    from minisgl.server.frontend import FrontendManager, ServedModel
    from minisgl.server.shell import run_shell
    from minisgl.tokenizer.server import PromptTooLong

    class Short(FakeTokenizerProcess):  # 最多放得下两轮（第三个问题带着两轮历史就放不下了）
        async def put(self, msg) -> None:
            if isinstance(msg, TokenizeMsg) and sum(m["role"] == "user" for m in msg.text) > 2:
                self.sent.append(msg)
                self.replies.put_nowait(UserReply(msg.uid, "", True, "error",
                                                  error="提示有 600 个 token", error_code=PromptTooLong.code))
                return
            await super().put(msg)

    fake = Short()
    monkeypatch.setattr(sys, "stdin", io.StringIO("一\n二\n三\n/exit\n"))
    asyncio.run(run_shell(lambda: FrontendManager(fake, fake), ServedModel("f", "/f", 512)))
    out = capsys.readouterr().out
    asked = [m.text for m in fake.sent if isinstance(m, TokenizeMsg)]
    assert [sum(m["role"] == "user" for m in a) for a in asked] == [1, 2, 3, 2]
    assert asked[-1][0] == {"role": "user", "content": "二"}  # 去掉的是最早的一轮
    assert "[对话太长" in out and "[出错]" not in out


def test_ctrl_c_during_a_shell_answer_cancels_only_that_answer(monkeypatch, capsys):
    from minisgl.message import AbortMsg, TokenizeMsg
    from minisgl.server.frontend import FrontendManager, ServedModel
    from minisgl.server.shell import run_shell

    class Stuck(FakeTokenizerProcess):  # 第一问永远不回答；收到它时模拟用户按 Ctrl-C
        async def put(self, msg) -> None:
            if isinstance(msg, TokenizeMsg) and not self.sent:
                self.sent.append(msg)
                asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGINT)
                return
            await super().put(msg)

    fake = Stuck()
    monkeypatch.setattr(sys, "stdin", io.StringIO("卡住的问题\n你好\n/exit\n"))
    asyncio.run(run_shell(lambda: FrontendManager(fake, fake), ServedModel("f", "/f", 512)))
    out = capsys.readouterr().out
    assert "[已取消这个回答]" in out and "第 1 轮的回答" in out  # 取消后 shell 照常回答下一问
    first = fake.sent[0].uid
    assert any(isinstance(m, AbortMsg) and m.uid == first for m in fake.sent)
