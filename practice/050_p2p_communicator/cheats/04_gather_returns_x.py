# 作弊：world_size = 1 时 all_gather 直接返回 x（“只有一个 rank，拼出来就是它自己”）
# 为什么必须判错：题目要求 all_gather 总是返回一块新的内存、不和 x 共用，一个 rank 时也要拷贝；返回 x 本身，调用者之后改写自己的缓冲区（比如下一步复用的 logits 缓冲区）时，手里“拼好的结果”跟着变。
# 判词里要有：共用内存
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）

_gather = P2PDistributedImpl.all_gather


def _all_gather(self, x):
    if self.world_size == 1:
        return x
    return _gather(self, x)


P2PDistributedImpl.all_gather = _all_gather
