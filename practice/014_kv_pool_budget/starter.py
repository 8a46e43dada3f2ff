"""练习 014 · 由内存预算算出 KV 池能放多少页（第 4 章 KV 池、页表与 token 池）

把每个 `raise NotImplementedError` 换成你的实现，然后评测。要求和提示见这道题的题面。
"""

from __future__ import annotations


def dtype_bytes(dtype: str) -> int:
    """torch dtype 的名字（不带 "torch."）→ 每个元素的字节数。

    只认 "float64"、"float32"、"float16"、"bfloat16"，别的名字抛 ValueError。
    """
    raise NotImplementedError


def local_kv_heads(num_kv_heads: int, tp_size: int) -> int:
    """一个 rank 存几个 KV 头：头数够分就平均切分（必须整除），不够分就复制（每个 rank 1 个，
    要求 tp_size 是 num_kv_heads 的倍数）。参数不是正数或分不了时抛 ValueError。
    """
    raise NotImplementedError


def kv_bytes_per_token(
    num_layers: int, num_kv_heads: int, head_dim: int, dtype: str, tp_size: int = 1
) -> int:
    """一个 token 在一个 rank 上占的字节数：2 × 层数 × 本地 KV 头数 × head_dim × 元素字节数。

    num_layers、head_dim 小于 1 时抛 ValueError。
    """
    raise NotImplementedError


def num_pages(
    budget_bytes: int,
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    dtype: str,
    page_size: int,
    tp_size: int = 1,
) -> int:
    """预算 budget_bytes 能放下几个整页（每页 page_size 个 token）。

    budget_bytes 是负数、page_size 小于 1 时抛 ValueError。
    """
    raise NotImplementedError
