# 作弊：all_gather 把输出缓冲区存在插件里，形状一样时每次都收进同一块内存再返回它（省一次分配）
# 为什么必须判错：题目要求 all_gather 每次返回一块新的内存；上一次交出去的结果调用者还拿着（比如上一步的 logits 还没采样完），下一次 all_gather 把它悄悄改写成了新的数据。
# 判词里要有：以前一次 all_gather
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def _all_gather(self, x):
    parts = self._exchange(x)
    shape = (self.world_size * x.shape[0], *x.shape[1:])
    out = getattr(self, "_out", None)
    if out is None or tuple(out.shape) != shape or out.dtype != x.dtype:
        out = self._out = torch.empty(shape, dtype=x.dtype)
    torch.cat(parts, dim=0, out=out)
    return out


P2PDistributedImpl.all_gather = _all_gather
