# 作弊：最直接的环：每一步把整条向量传给右邻居，n−1 步以后每个 rank 见过所有向量，自己加起来
# 为什么必须判错：题目要求每一步只发一块（约 L/n 个数），每个 rank 一共只发约 2(n−1)/n·L 个数；整条整条地转发，每个 rank 要发 (n−1)·L 个数，n = 8 时是环形算法的 3.5 倍，第一条消息的长度就不对。
# 判词里要有：2(n−1)/n
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def ring_all_reduce(rank, n, data):
    if not 0 <= rank < n:
        raise ValueError("rank 越界")
    total = list(data)
    passing = list(data)
    for _ in range(n - 1):
        passing = yield passing
        total = [a + b for a, b in zip(total, passing)]
    # 凑够 2(n−1) 步：后面 n−1 步发空消息
    for _ in range(n - 1):
        yield []
    return total
