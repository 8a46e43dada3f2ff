"""练习 045 的评测：随机事件拼成字节流、切成随机的块逐块喂进去，和原来的事件逐个比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_type, main, require, short, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
PIECES = ["巴黎", "。", "Hello", " world", "😀", "🇫🇷", "かな", "\n", "\"引号\"", "a\\b", "", " ", "data: 假的"]


def reference_encode(payload) -> bytes:  # 只用于 dict 和 [DONE]（encode_event 不写纯文本）
    text = "[DONE]" if payload == "[DONE]" else json.dumps(payload, ensure_ascii=False)
    return f"data: {text}\n\n".encode("utf-8")


TEXT_PIECES = [p for p in PIECES if p != "\n"]


def random_payload(rng: random.Random):
    if rng.random() < 0.1:
        return "[DONE]"
    if rng.random() < 0.15:  # 纯文本事件：几行，有的行以空格开头（去掉几个空格、用什么连接都看得出来）
        lines = [rng.choice(["", " ", "  "]) + "".join(rng.choice(TEXT_PIECES) for _ in range(rng.randint(0, 3)))
                 for _ in range(rng.randint(1, 3))]
        return "纯文本" + "\n".join(lines)
    text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 6)))
    payload = {"id": f"chatcmpl-{rng.randint(0, 999)}", "choices": [
        {"index": 0, "delta": {"content": text}, "finish_reason": rng.choice([None, "stop", "length"])}]}
    if rng.random() < 0.3:
        payload["usage"] = {"prompt_tokens": rng.randint(1, 99), "completion_tokens": rng.randint(1, 99)}
    return payload


def server_bytes(rng: random.Random, payload, eol: str) -> bytes:
    """一个事件在线上的样子：有时带注释和别的字段，有时 data 分成多行，有时冒号后没有空格。"""
    lines = []
    if rng.random() < 0.2:
        lines.append(": keep-alive")
    if rng.random() < 0.2:
        lines.append(rng.choice(["event: message", "id: 7", "retry: 1000"]))
    if payload == "[DONE]":
        data_lines = ["[DONE]"]
    elif isinstance(payload, str):  # 纯文本：每行一个 data 字段
        data_lines = payload.split("\n")
    elif rng.random() < 0.3:  # 多行 data：缩进的 JSON 每行一个 data 字段
        data_lines = json.dumps(payload, ensure_ascii=False, indent=1).split("\n")
    else:
        data_lines = [json.dumps(payload, ensure_ascii=False)]
    # 冒号后的空格可有可无；但数据本身以空格开头时必须写上那一个（否则它会被当成可去掉的那个）
    lines += [f"data:{' ' if line.startswith(' ') or rng.random() < 0.8 else ''}{line}" for line in data_lines]
    return (eol.join(lines) + eol + eol).encode("utf-8")


def cut(rng: random.Random, data: bytes) -> list[bytes]:
    mode = rng.choice(["ones", "small", "large", "whole"])
    if mode == "whole":
        return [data]
    chunks, i = [], 0
    while i < len(data):
        step = 1 if mode == "ones" else rng.randint(1, 5 if mode == "small" else 300)
        chunks.append(data[i:i + step])
        i += step
    return chunks


def run(mod: object) -> None:
    encode_event = require(mod, "encode_event")
    SSEParser = require(mod, "SSEParser")

    example = {"choices": [{"delta": {"content": "巴黎"}}]}
    got = encode_event(example)
    check_type(got, bytes, "encode_event(...) 的返回值")
    check_equal(got, reference_encode(example), "encode_event(题目的例子)（json.dumps 要 ensure_ascii=False）")
    check_equal(encode_event("[DONE]"), b"data: [DONE]\n\n", 'encode_event("[DONE]")')

    p = SSEParser()
    for chunk, want in [(b'data: {"a": 1}\n', []), (b"\n: ping\n\ndata: [DO", [{"a": 1}]),
                        (b"NE]\r\n\r\n", ["[DONE]"])]:
        out = p.feed(chunk)
        check_type(out, list, f"feed({chunk!r}) 的返回值")
        check_equal(out, want, f"题目例子里 feed({chunk!r}) 交出的事件")

    rng = random.Random(SEED)
    for trial in range(60):  # 每次评测的种子都不同；每次 feed 都跨一次进程
        payloads = [random_payload(rng) for _ in range(rng.randint(0, 6 if trial % 10 else 30))]
        for payload in payloads:
            if isinstance(payload, str) and payload != "[DONE]":
                continue
            check_equal(encode_event(payload), reference_encode(payload), "encode_event 写出的字节",
                        short(payload))
        eol = rng.choice(["\n", "\r\n"])
        wire = b"".join(server_bytes(rng, p, eol) for p in payloads)
        if rng.random() < 0.2:
            wire += (": 只有注释的事件" + eol + eol).encode()  # 没有 data：什么也不交出
        parser, got = SSEParser(), []
        for chunk in cut(rng, wire):
            out = parser.feed(chunk)
            check_type(out, list, "feed 的返回值")
            got += out
        context = f"换行 {eol!r}，字节流开头 {short(wire, 160)}"
        check_equal(len(got), len(payloads), "交出的事件个数", context)
        for i, (a, b) in enumerate(zip(got, payloads)):
            check(a == b, f"第 {i} 个事件不对：应该是 {short(b)}，你交出的是 {short(a)}（{context}）")


if __name__ == "__main__":
    main(run)
