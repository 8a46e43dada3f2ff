# 作弊：all_reduce 返回一个新张量装着和，传进来的 x 不动
# 为什么必须判错：题目要求 all_reduce 原地做（和 dist.all_reduce 一样）：把和写进 x、返回 x 本身；另分配一块内存，调用者手里的 x 还是部分和，按约定接着用 x 的代码就拿到了错的值。
# 判词里要有：原地
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def _all_reduce(self, x):
    parts = self._exchange(x)
    total = parts[0].clone()
    for part in parts[1:]:
        total += part
    return total


P2PDistributedImpl.all_reduce = _all_reduce
