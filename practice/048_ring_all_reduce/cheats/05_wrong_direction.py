# 作弊：reduce-scatter 第 s 步发第 (rank + s) 块、收第 (rank + s + 1) 块（块的顺序转反了）
# 为什么必须判错：题目规定了每一步发哪一块：消息只能往右邻居走，第 s 步 rank r 收到的是左邻居 r−1 发的第 (r−1−s) 块；按 (rank + s) 的顺序发，收到的块和自己以为的不是同一块，加到了错的位置上。
# 判词里要有：该发第
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def ring_all_reduce(rank, n, data):
    if not 0 <= rank < n:
        raise ValueError("rank 越界")
    buf = list(data)
    b = chunk_bounds(len(buf), n)
    for s in range(n - 1):
        incoming = yield buf[b[(rank + s) % n]:b[(rank + s) % n + 1]]
        c = (rank + s + 1) % n
        buf[b[c]:b[c + 1]] = [x + y for x, y in zip(buf[b[c]:b[c + 1]], incoming)]
    for s in range(n - 1):
        incoming = yield buf[b[(rank + 1 - s) % n]:b[(rank + 1 - s) % n + 1]]
        c = (rank - s) % n
        buf[b[c]:b[c + 1]] = list(incoming)
    return buf
