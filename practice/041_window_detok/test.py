"""练习 041 的评测：小词表的分词器（字节级、开头空格会被去掉），随机 token 流随机分步 push。

用法：python test.py 要评测的文件.py   （judge.py 会替你做）
"""

from __future__ import annotations

import itertools
import random
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # 找到 practice/judgekit.py
from judgekit import check, check_equal, check_type, main, require, short, seed

SEED = seed()  # 每次评测由评测器抽一个，学习者的进程看不到；没通过时判词里有 JUDGE_SEED=… 可以复现
WORDS = ["the", " the", " cat", " sat", "ing", " on", " mat", ".", "\n", " ", " 世界", "你好", "😀", "é", ","]
SPLIT_CHARS = "世界好中文字あいうカナ😀🎉🌟é€"

# 词表：0–255 是单个字节，其后是整词 token
VOCAB: list[bytes] = [bytes([b]) for b in range(256)] + [w.encode() for w in WORDS]
WORD_ID = {w: 256 + i for i, w in enumerate(WORDS)}


def reference_decode(ids: list[int]) -> str:
    """字节拼起来按 UTF-8 解码（坏字节变 U+FFFD），整段开头的一个空格去掉（像 SentencePiece）。"""
    text = b"".join(VOCAB[i] for i in ids).decode("utf-8", errors="replace")
    return text[1:] if text.startswith(" ") else text


# 交给学习者的 decode 顺便数解码了多少个 token。它在一个只有自己的命名空间里定义：从它的
# __globals__ 够不着上面那个不计数的 reference_decode；计数是 itertools.count，只增不减。
_COUNTING_SOURCE = """
def make_counting_decode(vocab, counter):
    def decode(ids):
        ids = list(ids)
        for _ in ids:
            next(counter)
        text = b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")
        return text[1:] if text.startswith(" ") else text
    return decode
"""


def counting_decode() -> tuple[Callable[[list[int]], str], itertools.count]:
    """返回 (交给学习者的 decode, 计数器)。流结束时 next(计数器) 读出一共解码了多少个 token。"""
    namespace: dict = {}
    exec(_COUNTING_SOURCE, namespace)
    counter = itertools.count()
    return namespace["make_counting_decode"](tuple(VOCAB), counter), counter


def random_stream(rng: random.Random, length: int) -> list[int]:
    ids: list[int] = []
    while len(ids) < length:
        if rng.random() < 0.5:
            ids.append(WORD_ID[rng.choice(WORDS)])
        else:  # 一个字按字节拆成几个 token
            ids += list(rng.choice(SPLIT_CHARS).encode())
    if rng.random() < 0.3:  # 停在一个字的中间
        ids += list(rng.choice("世😀好").encode())[:rng.randint(1, 2)]
    return ids


def run(mod: object) -> None:
    IncrementalDecoder = require(mod, "IncrementalDecoder")

    # 题目里的例子
    e4, b8, x96 = "世".encode()
    dec = IncrementalDecoder(counting_decode()[0])
    steps = [([WORD_ID["the"]], "the"), ([WORD_ID[" cat"]], " cat"), ([e4, b8], ""), ([x96, WORD_ID[" sat"]], "世 sat")]
    for ids, want in steps:
        got = dec.push(ids)
        check_type(got, str, f"push({ids}) 的返回值")
        check_equal(got, want, f"题目例子里 push({[VOCAB[i].decode('utf-8', 'replace') for i in ids]})")
    check_equal(dec.flush(), "", "题目例子最后的 flush()")

    rng = random.Random(SEED)
    for trial in range(60):
        ids = random_stream(rng, rng.choice([20, 80, 300]))
        decode, counter = counting_decode()
        dec = IncrementalDecoder(decode)
        out, i = "", 0
        while i < len(ids):
            n = rng.randint(1, 4)
            got = dec.push(ids[i:i + n])
            i += n
            check_type(got, str, "push 的返回值")
            out += got
            stable = reference_decode(ids[:i]).rstrip("\ufffd")
            context = f"前 {i} 个 token 解码是 {short(reference_decode(ids[:i]))}"
            check(not stable.startswith(out) or out == stable,
                  f"push 之后交出的全部文字应该是 {short(stable)}，你的是 {short(out)}："
                  f"已经稳定的字要尽早发出。{context}")
            check_equal(out, stable, "到目前为止交出的全部文字（已经发出的不能收回、不能重发）", context)
        out += dec.flush()
        check_equal(out, reference_decode(ids), "flush() 之后全部输出拼起来", f"{len(ids)} 个 token")
        budget, tokens = 30 * len(ids) + 100, next(counter)
        check(tokens <= budget,
              f"decode 一共解码了 {tokens} 个 token，超过了 {budget}（30 × {len(ids)} + 100）："
              "每次只解码一个小窗口，不要每次都解码全部 token")


if __name__ == "__main__":
    main(run)
