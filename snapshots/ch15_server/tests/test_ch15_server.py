"""第 15 章：`python -m minisgl` 是一个真的服务器，官方 openai 客户端能用。

整个模块只启动一个服务器进程（模块级 fixture），用的都是真进程、真端口：
  - openai 客户端：chat 和 completions，流式和非流式；temperature=0 的回答与 HF 贪心逐 token 相同；
  - 坏请求各得到一个 4xx 和 OpenAI 格式的错误，服务器照常服务；
  - 100 个并发请求全部完成，每个拿到的是自己的答案；
  - 流式读到一半断开：请求被取消，调度器空闲时 KV 页的账目对得上；
  - 杀掉调度器：请求立刻得到 5xx，不挂住；SIGTERM：所有子进程退出，端口和 IPC 目录都释放。
最后两个测试会弄坏服务器，所以放在最后（pytest 按文件顺序运行）。
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


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Server:
    log_path = tmp_path_factory.mktemp("ch15") / "server.log"
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    cmd = [sys.executable, "-m", "minisgl", "--model-path", str(MODEL), "--port", str(port),
           "--num-pages", str(NUM_PAGES), "--max-running-requests", "32"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    server = Server(proc, port, log_path)
    family: set[int] = set()
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE
        while True:
            if proc.poll() is not None:
                pytest.fail(f"服务器启动时退出了（{proc.returncode}）：\n{server.log()[-3000:]}")
            try:
                if httpx.get(f"{server.url}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"服务器 {STARTUP_DEADLINE} 秒内没有就绪：\n{server.log()[-3000:]}")
            time.sleep(0.3)
        family = descendants(proc.pid)
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for pid in family | descendants(proc.pid):  # 万一有漏网的子进程：别留下孤儿
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


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
    "n_two": ("/v1/completions", {"prompt": "hi", "n": 2}, "n"),
    "empty_prompt": ("/v1/completions", {"prompt": ""}, "空"),
    "prompt_too_long": ("/v1/completions", {"prompt": "hello " * NUM_PAGES, "max_tokens": 4},
                        "prompt"),
    "prompt_too_long_stream": ("/v1/chat/completions", {"messages": [
        {"role": "user", "content": "hello " * NUM_PAGES}], "stream": True}, "messages"),
    "lone_surrogate_content": ("/v1/chat/completions",
                               b'{"messages": [{"role": "user", "content": "hi \\ud800"}]}',
                               "messages.0.content"),
    "lone_surrogate_stop": ("/v1/completions", b'{"prompt": "hi", "stop": "\\udc00"}', "stop"),
    "huge_max_tokens": ("/v1/completions", {"prompt": "hi", "max_tokens": 10**20}, "max_tokens"),
    "huge_top_k": ("/v1/completions", {"prompt": "hi", "top_k": 10**20}, "top_k"),
    "presence_penalty": ("/v1/chat/completions", {"messages": CHAT, "presence_penalty": 1.0},
                         "presence_penalty"),
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


# ---------------------------------------------------------------- 后端死了：立刻 5xx；SIGTERM：全部退出


def test_dead_scheduler_fails_fast_with_5xx(server):
    pid = int(re.search(r"已启动调度器 rank 0（pid (\d+)）", server.log()).group(1))
    assert alive(pid)
    os.kill(pid, signal.SIGKILL)
    server.wait_for_log(rf"调度器 rank 0（pid {pid}）意外退出")
    # 超时给得很宽：挂住的请求会在这里失败（没有 503 就是超时），而不是断言一个时间
    r = httpx.post(server.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 3},
                   timeout=30)
    assert r.status_code == 503 and r.json()["error"]["type"] == "server_error"
    assert "调度器" in r.json()["error"]["message"]
    assert httpx.get(server.url + "/health", timeout=10).status_code == 503
    assert httpx.get(server.url + "/v1/models", timeout=10).status_code == 200  # 进程本身还活着


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
    from minisgl.server.api_server import FrontendManager, ServedModel
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
    from minisgl.server.api_server import BackendUnavailable, FrontendManager

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
    assert parse_args(["--model-path", str(MODEL), "--shell-mode"]).max_running_req == 1
    for argv, words in [(["--port", "abc"], "整数"), (["--port", "70000"], "1–65535"),
                        (["--cache-type", "lru"], "不能取"), (["--bogus"], "不认识的参数"),
                        (["--model-path", "/nonexistent"], "config.json"),
                        (["--model-path", str(MODEL), "--memory-ratio", "2"], "memory_ratio")]:
        with pytest.raises(SystemExit) as info:
            parse_args(argv)
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert "错误：" in err and words in err, err


def test_drain_fails_waiters_after_the_grace_period_and_refuses_new_requests():
    from minisgl.core import SamplingParams
    from minisgl.server.api_server import BackendUnavailable, FrontendManager

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
    from minisgl.server.api_server import FrontendManager

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
    from minisgl.tokenizer.server import PROMPT_TOO_LONG, TokenizerHandler

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
    assert all(r.finish_reason == "error" and r.error.startswith(PROMPT_TOO_LONG) for r in replies)
    assert [m.uid for msgs in tokenized for m in msgs] == [2]  # 超长的那个根本没有分词


def test_shell_drops_oldest_turns_when_the_chat_gets_too_long(monkeypatch, capsys):
    from minisgl.message import TokenizeMsg, UserReply
    from minisgl.server.api_server import FrontendManager, ServedModel
    from minisgl.server.shell import run_shell
    from minisgl.tokenizer.server import PROMPT_TOO_LONG

    class Short(FakeTokenizerProcess):  # 最多放得下两轮（第三个问题带着两轮历史就放不下了）
        async def put(self, msg) -> None:
            if isinstance(msg, TokenizeMsg) and sum(m["role"] == "user" for m in msg.text) > 2:
                self.sent.append(msg)
                self.replies.put_nowait(UserReply(msg.uid, "", True, "error",
                                                  error=f"{PROMPT_TOO_LONG}：提示有 600 个 token"))
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
    from minisgl.server.api_server import FrontendManager, ServedModel
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
