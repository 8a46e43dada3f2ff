# 作弊：all_gather 从自己开始拼：[自己的 x, 下一个 rank 的 x, …]（像环形转发时收到的顺序）
# 为什么必须判错：题目要求结果按 rank 顺序排：不管在哪个 rank 上，前 n 行都是 rank 0 的 x；从自己开始拼，rank 0 上碰巧对，别的 rank 上 LM head 切回词表时各段就对错了位置，采样出别的 token。
# 判词里要有：从自己
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def _all_gather(self, x):
    parts = self._exchange(x)
    return torch.cat(parts[self.rank:] + parts[: self.rank], dim=0)


P2PDistributedImpl.all_gather = _all_gather
