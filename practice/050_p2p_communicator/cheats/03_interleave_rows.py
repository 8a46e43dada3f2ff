# 作弊：all_gather 把各 rank 的 x 在第 1 维叠起来再展平（torch.stack(parts, dim=1).reshape(...)），行交错
# 为什么必须判错：题目要求沿第 0 维按 rank 整块拼接：前 n 行是 rank 0 的 x；交错以后形状完全对，批里只有一行时内容也对，批大小 > 1 时每一行都混着别的 rank 的数据，正是上游 LM head 出过的那类 bug。
# 判词里要有：行交错
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def _all_gather(self, x):
    parts = self._exchange(x)
    return torch.stack(parts, dim=1).reshape(self.world_size * x.shape[0], *x.shape[1:])


P2PDistributedImpl.all_gather = _all_gather
