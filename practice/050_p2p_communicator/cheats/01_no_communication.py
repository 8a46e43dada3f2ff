# 作弊：不通信：all_reduce 原样返回 x，all_gather 返回 x 的拷贝
# 为什么必须判错：题目要求 all_reduce 得到所有 rank 的 x 之和、all_gather 得到所有 rank 的 x 按 rank 顺序拼起来；只看自己的 x，一个 rank 时碰巧对，两个以上就少了别的 rank 的部分和，模型输出全错。
# 判词里要有：没有和别的 rank 通信｜形状应该是
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def _all_reduce(self, x):
    return x


def _all_gather(self, x):
    return x.clone()


P2PDistributedImpl.all_reduce = _all_reduce
P2PDistributedImpl.all_gather = _all_gather
