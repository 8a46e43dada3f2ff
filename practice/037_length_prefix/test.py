"""练习 037 的评测：随机消息拼好后切成随机的块逐块喂进去，和原来的消息逐条比较。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_raises, check_type, main, require, short, seed, with_bad_item

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现


def reference_frame(payloads):
    return b"".join(len(p).to_bytes(4, "big") + p for p in payloads)


def random_payload(rng: random.Random) -> bytes:
    kind = rng.random()
    if kind < 0.15:
        return b""
    if kind < 0.3:
        return b"\n" * rng.randint(1, 3) + b"\x00\x00\x00\x05"  # 换行、像长度一样的字节
    if kind < 0.33:  # 超过 65535 字节：长度要用满 4 个字节（2 个字节的前缀在这里就错了）
        return rng.randbytes(rng.randint(65536, 70000))
    size = rng.choice([rng.randint(1, 20), rng.randint(200, 400), rng.randint(250, 9000)])
    return rng.randbytes(size)


def cut(rng: random.Random, data: bytes) -> list[bytes]:
    mode = rng.choice(["ones", "small", "large", "whole"])
    if mode == "ones" and len(data) > 600:  # 1 字节一块只用在短的数据上：每一块都要跨一次进程
        mode = "small"
    if mode == "small" and len(data) > 3000:  # 几字节一块也只用在不太长的数据上：块数决定跨进程的次数
        mode = "large"
    if mode == "whole":
        return [data]
    chunks, i = [], 0
    while i < len(data):
        step = 1 if mode == "ones" else rng.randint(1, 7 if mode == "small" else 5000)
        chunks.append(data[i:i + step])
        i += step
    return chunks


def run(mod: object) -> None:
    frame = require(mod, "frame")
    Deframer = require(mod, "Deframer")

    example = [b"hi", b"", b"\n\n"]
    data = frame(example)
    check_type(data, bytes, "frame(...) 的返回值")
    check_equal(data, reference_frame(example), "frame([b'hi', b'', b'\\n\\n'])（长度是 4 字节、大端）")
    d = Deframer()
    steps = [(data[:3], []), (data[3:9], [b"hi"]), (data[9:], [b"", b"\n\n"])]
    for chunk, want in steps:
        got = d.feed(chunk)
        check_type(got, list, f"feed({chunk!r}) 的返回值")
        check_equal(got, want, f"题目例子里 feed({chunk!r}) 交出的消息")
    check_equal(d.pending, 0, "题目例子最后的 pending")

    rng = random.Random(SEED)
    for trial in range(120):
        payloads = [random_payload(rng) for _ in range(rng.randint(0, 8 if trial % 10 else 40))]
        data = frame(payloads)
        check_equal(data, reference_frame(payloads), f"frame({len(payloads)} 条消息) 的字节",
                    short([len(p) for p in payloads]))
        d = Deframer()
        got = []
        fed = delivered = 0
        for chunk in cut(rng, data):
            out = d.feed(chunk)
            fed += len(chunk)
            check_type(out, list, "feed 的返回值")
            got += out
            # 交出的消息加上手里的字节，正好是目前收到的全部
            delivered += sum(4 + len(p) for p in out)
            check_equal(d.pending, fed - delivered, "pending（收到的字节数减去已经交出的消息占的字节数）",
                        f"消息长度 {short([len(p) for p in payloads])}，已喂 {fed} 字节")
            check(all(type(p) is bytes for p in out), f"feed 交出的消息应该是 bytes，你给的是 {short(out)}")
        check_equal(len(got), len(payloads), "一共交出的消息条数", short([len(p) for p in payloads]))
        for i, (a, b) in enumerate(zip(got, payloads)):
            check(a == b, f"第 {i} 条消息不对：应该是 {short(b)}，你交出的是 {short(a)}"
                          f"（消息长度 {short([len(p) for p in payloads])}）")
        check_equal(d.pending, 0, "全部喂完之后的 pending")

    if sys.maxsize > 2**32:  # 浏览器里的 Python 是 32 位的，len() 报不出 2**32
        class Huge(bytes):  # 不真的分配 4 GiB：只让 len() 报一个放不下的长度
            size = 2**32

            def __len__(self):
                return self.size

        for _ in range(4):  # 放不下的那条在随机位置，长度就在边界上（2**32）或者更长
            big = Huge(b"x")
            big.size = rng.choice([2**32, 2**32, 2**32 + rng.randint(1, 2**20)])
            items = with_bad_item(rng, [rng.randbytes(rng.randint(0, 9)) for _ in range(rng.randint(1, 6))],
                                  lambda old, r: big)
            where = next(i for i, x in enumerate(items) if x is big)
            check_raises(ValueError, frame, items,
                         what=f"frame(共 {len(items)} 条，第 {where} 条长 {big.size} 字节)")


if __name__ == "__main__":
    main(run)
