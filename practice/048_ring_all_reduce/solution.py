"""练习 048 的参考答案。"""

from __future__ import annotations


def chunk_bounds(length: int, n: int) -> list[int]:
    if n <= 0:
        raise ValueError(f"n 必须是正数，现在是 {n}")
    if length < 0:
        raise ValueError(f"length 不能是负数，现在是 {length}")
    return [i * length // n for i in range(n + 1)]


def ring_all_reduce(rank: int, n: int, data: list):
    if n <= 0:
        raise ValueError(f"n 必须是正数，现在是 {n}")
    if not 0 <= rank < n:
        raise ValueError(f"rank 必须在 [0, {n}) 里，现在是 {rank}")
    buf = list(data)  # 自己的缓冲区：不动调用者的列表
    b = chunk_bounds(len(buf), n)

    def chunk(c: int) -> list:
        return buf[b[c]:b[c + 1]]

    # reduce-scatter：第 s 步发第 (rank − s) 块，收左邻居的第 (rank − s − 1) 块，加到自己的那份上
    for s in range(n - 1):
        incoming = yield chunk((rank - s) % n)
        c = (rank - s - 1) % n
        buf[b[c]:b[c + 1]] = [x + y for x, y in zip(chunk(c), incoming)]
    # 现在第 (rank + 1) 块在本 rank 上是完整的和
    # all-gather：第 s 步发第 (rank + 1 − s) 块，收第 (rank − s) 块，直接覆盖
    for s in range(n - 1):
        incoming = yield chunk((rank + 1 - s) % n)
        c = (rank - s) % n
        buf[b[c]:b[c + 1]] = list(incoming)
    return buf
