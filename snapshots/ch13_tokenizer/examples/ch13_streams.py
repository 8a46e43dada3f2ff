"""本章演示和测试共用的小工具：按字节拆 token、逐 token 朴素解码、数“每个 token 出几个字符”。"""

from __future__ import annotations

import functools
from typing import Sequence


@functools.lru_cache(maxsize=None)
def _byte_to_char() -> dict[int, str]:
    """GPT-2 式字节级 BPE 的约定：每个字节对应词表里的一个可见字符（空格是 Ġ，换行是 Ċ）。"""
    visible = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
               *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in visible}
    extra = 0
    for b in range(256):
        if b not in table:  # 不可见的字节挪到 256 之后
            table[b] = chr(256 + extra)
            extra += 1
    return table


def byte_tokens(tokenizer, data: bytes) -> list[int]:
    """把一串字节拆成“一个字节一个 token”（字节级 BPE 的词表里每个字节都有自己的 token）。"""
    ids = byte_token_table(tokenizer)
    missing = sorted({b for b in data if b not in ids})
    if missing:
        raise ValueError(f"词表里没有字节 {missing[:5]} 的 token（不是字节级 BPE，或这个字节从没在训练数据里出现过）")
    return [ids[b] for b in data]


@functools.lru_cache(maxsize=4)
def byte_token_table(tokenizer) -> dict[int, int]:
    """字节 → 它的 token id。SmolLM2 的词表缺少几个从不出现的控制字节，其余 UTF-8 会用到的字节都在。"""
    vocab = tokenizer.get_vocab()
    return {b: vocab[ch] for b, ch in _byte_to_char().items() if ch in vocab}


def naive_pieces(tokenizer, ids: Sequence[int]) -> list[str]:
    """朴素的流式：每来一个 token 就单独 decode 它，直接发出去。"""
    return [tokenizer.decode([t]) for t in ids]


def incremental_pieces(tokenizer, ids: Sequence[int]) -> list[str]:
    """用本章的 IncrementalDecoder 逐 token 流式；最后一项是结束时 flush 出来的部分。"""
    from minisgl.tokenizer import IncrementalDecoder

    decoder = IncrementalDecoder(tokenizer)
    return [decoder.push([t]) for t in ids] + [decoder.flush()]


def token_bytes(tokenizer, token_id: int) -> bytes | None:
    """字节级 BPE 里一个 token 代表的字节（特殊 token 返回 None）。"""
    back = _char_to_byte()
    piece = tokenizer.convert_ids_to_tokens(token_id)
    if piece is None or any(ch not in back for ch in piece):
        return None
    return bytes(back[ch] for ch in piece)


@functools.lru_cache(maxsize=None)
def _char_to_byte() -> dict[str, int]:
    return {ch: b for b, ch in _byte_to_char().items()}


# 随机文字的几类字符：英文、汉字、假名、emoji 和几个常见的非 ASCII 符号
CHAR_CLASSES = [
    "abcdefgXYZ0123 .,!?\n",
    "".join(chr(c) for c in range(0x4E00, 0x4E00 + 2000, 7)),
    "".join(chr(c) for c in range(0x3041, 0x30FA)),
    "".join(chr(c) for c in range(0x1F600, 0x1F650)),
    "éßΩ—“€",
]


def random_stream(tokenizer, rng) -> list[int]:
    """一段随机文字切成几块，每块要么正常分词、要么一个字节一个 token。"""
    ids: list[int] = []
    for _ in range(rng.randint(1, 6)):
        chunk = "".join(rng.choice(rng.choice(CHAR_CLASSES)) for _ in range(rng.randint(1, 6)))
        ids += tokenizer.encode(chunk) if rng.random() < 0.5 else byte_tokens(tokenizer, chunk.encode())
    return ids


def random_steps(rng, ids: Sequence[int], most: int = 4) -> list[list[int]]:
    """把 token 随机分成若干步，每步 1–most 个。"""
    steps, i = [], 0
    while i < len(ids):
        n = rng.randint(1, most)
        steps.append(list(ids[i:i + n]))
        i += n
    return steps


def show(pieces: Sequence[str]) -> str:
    """把每一步发出的文字排成一行：步与步之间用 |，什么也没发的一步记作 ∅，换行写成 \\n。"""
    return "|".join(p.replace("\n", "\\n") if p else "∅" for p in pieces)
