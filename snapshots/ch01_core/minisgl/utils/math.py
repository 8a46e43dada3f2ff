"""整数小工具：整除、向上取整、按页对齐。

张量并行切权重、KV 池按页分配都离不开这几种算术。把它们写成有名字的函数，
出错时能说清是哪两个数、为什么不行，而不是在几层调用之外得到一个形状对不上的张量。
"""

from __future__ import annotations


def div_even(a: int, b: int, allow_replicate: bool = False) -> int:
    """返回 a // b，要求 a 能被 b 整除。

    allow_replicate=True 时还允许 a < b 且 b 能被 a 整除，此时返回 1。
    这是给张量并行切 KV 头用的：8 个 KV 头分给 16 个 rank，每个 rank 放 1 个，
    每个 KV 头复制到 16 / 8 = 2 个 rank 上。
    """
    if a < 0 or b <= 0:
        raise ValueError(f"div_even 要求 a ≥ 0、b > 0，收到 a={a}, b={b}")
    if allow_replicate and 0 < a < b:
        if b % a != 0:
            raise ValueError(
                f"无法复制：{b} 不是 {a} 的整数倍（{a} 份要平均复制到 {b} 个 rank 上）"
            )
        return 1
    if a % b != 0:
        raise ValueError(f"{a} 不能被 {b} 整除，无法平均切成 {b} 份")
    return a // b


def div_ceil(a: int, b: int) -> int:
    """a / b 向上取整：装下 a 个元素需要几个大小为 b 的块。"""
    if b <= 0:
        raise ValueError(f"div_ceil 的除数必须是正整数，收到 b={b}")
    return -(-a // b)


def align_ceil(a: int, b: int) -> int:
    """把 a 向上对齐到 b 的整数倍（例如 token 数对齐到整页）。"""
    return div_ceil(a, b) * b

