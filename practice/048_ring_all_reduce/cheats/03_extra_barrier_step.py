# 作弊：环形算法做完以后再多走一步“barrier”（发一个空列表），确认大家都到了才返回
# 为什么必须判错：题目要求正好 2(n−1) 步、第 2(n−1) 步收到最后一块就 return；多走的一步是多一次网络往返，每次 all-reduce 都白白多等一个延迟，测试按步数检查时它还在 yield。
# 判词里要有：还在发消息
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_honest = ring_all_reduce


def ring_all_reduce(rank, n, data):
    result = yield from _honest(rank, n, data)
    if n > 1:
        yield []  # barrier
    return result
