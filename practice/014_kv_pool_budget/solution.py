"""练习 014 · 由内存预算算出 KV 池能放多少页 —— 参考答案。"""

from __future__ import annotations

# torch 的 dtype 名字（去掉 "torch."）→ 每个元素几个字节
_DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}


def dtype_bytes(dtype: str) -> int:
    if dtype not in _DTYPE_BYTES:
        raise ValueError(f"不认识的 dtype {dtype!r}：只支持 {', '.join(_DTYPE_BYTES)}")
    return _DTYPE_BYTES[dtype]


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if value < 1:
            raise ValueError(f"{name} 必须是正整数：{value}")


def local_kv_heads(num_kv_heads: int, tp_size: int) -> int:
    _check_positive(num_kv_heads=num_kv_heads, tp_size=tp_size)
    if num_kv_heads >= tp_size:
        if num_kv_heads % tp_size != 0:
            raise ValueError(f"{num_kv_heads} 个 KV 头不能平均分给 {tp_size} 个 rank")
        return num_kv_heads // tp_size
    # 头比 rank 少：每个 rank 存 1 个头，每个头复制 tp_size // num_kv_heads 份
    if tp_size % num_kv_heads != 0:
        raise ValueError(f"{tp_size} 个 rank 不能平均复制 {num_kv_heads} 个 KV 头")
    return 1


def kv_bytes_per_token(
    num_layers: int, num_kv_heads: int, head_dim: int, dtype: str, tp_size: int = 1
) -> int:
    _check_positive(num_layers=num_layers, head_dim=head_dim)
    size = dtype_bytes(dtype)
    heads = local_kv_heads(num_kv_heads, tp_size)
    return 2 * num_layers * heads * head_dim * size  # 2：K 和 V 各一份


def num_pages(
    budget_bytes: int,
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    dtype: str,
    page_size: int,
    tp_size: int = 1,
) -> int:
    if budget_bytes < 0:
        raise ValueError(f"budget_bytes 不能是负数：{budget_bytes}")
    _check_positive(page_size=page_size)
    per_page = (
        kv_bytes_per_token(num_layers, num_kv_heads, head_dim, dtype, tp_size)
        * page_size
    )
    return budget_bytes // per_page  # 只放整页：零头不要
