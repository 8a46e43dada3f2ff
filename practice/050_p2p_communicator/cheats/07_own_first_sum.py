# 作弊：all_reduce 每个 rank 先拿自己的 x，再按 rank 顺序加上别人的（加法的顺序因 rank 而异）
# 为什么必须判错：题目要求所有 rank 的和逐位相同；浮点加法不满足结合律，rank 2 算 (x2 + x0) + x1、rank 0 算 (x0 + x1) + x2，最后几位不一样，各 rank 的隐状态从此分叉。
# 判词里要有：逐位相同
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def _all_reduce(self, x):
    parts = self._exchange(x)
    total = x.clone()
    for r, part in enumerate(parts):
        if r != self.rank:
            total += part
    x.copy_(total)
    return x


P2PDistributedImpl.all_reduce = _all_reduce
