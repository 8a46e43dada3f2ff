# 作弊：向量比 n 短时“块太小不值得切”，改成整条向量沿环传 n−1 次、各自加起来
# 为什么必须判错：题目要求向量比 n 短时也按规定切块（有的块是空的，空块也照样发一个空列表），每一步只发一块；整条转发时发出去的数比这一步该发的那块多，测试在比 n 短的向量上专门检查了。
# 判词里要有：只该发第
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_honest = ring_all_reduce


def ring_all_reduce(rank, n, data):
    if len(data) >= n or not 0 <= rank < n:
        return (yield from _honest(rank, n, data))
    total, passing = list(data), list(data)
    for _ in range(n - 1):
        passing = yield passing
        total = [a + b for a, b in zip(total, passing)]
    for _ in range(n - 1):
        yield []
    return total
