# 作弊：all-gather 阶段也把收到的块加到自己的缓冲区上（和 reduce-scatter 用同一段循环体）
# 为什么必须判错：题目要求 all-gather 收到的块直接覆盖：它已经是所有 rank 的总和，再加上自己那一份部分和就多算了；n ≥ 3 时转发出去的块就不对了。
# 判词里要有：覆盖
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def ring_all_reduce(rank, n, data):
    if not 0 <= rank < n:
        raise ValueError("rank 越界")
    buf = list(data)
    b = chunk_bounds(len(buf), n)
    for step in range(2 * (n - 1)):
        s = step if step < n - 1 else step - (n - 1)
        send = (rank - s) % n if step < n - 1 else (rank + 1 - s) % n
        incoming = yield buf[b[send]:b[send + 1]]
        c = (send - 1) % n
        buf[b[c]:b[c + 1]] = [x + y for x, y in zip(buf[b[c]:b[c + 1]], incoming)]
    return buf
