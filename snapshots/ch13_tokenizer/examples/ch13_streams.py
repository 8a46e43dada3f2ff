"""本章演示和测试共用的小工具：按字节拆 token、逐 token 朴素解码、数“每个 token 出几个字”。"""

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
