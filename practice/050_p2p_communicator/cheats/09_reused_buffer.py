# 作弊：all_gather 只分配一个接收缓冲区，每次 recv 都收进它，再把它放进列表
# 为什么必须判错：题目要求拼出每个 rank 各自的 x；列表里的几项其实是同一个张量，最后一次 recv 把前面收到的都覆盖了，拼出来的是“最后一个 rank 的 x”重复几遍。
# 判词里要有：不对
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def _all_gather(self, x):
    for dst in range(self.world_size):
        if dst != self.rank:
            self.send(x, dst)
    buf = torch.empty_like(x)
    parts = []
    for src in range(self.world_size):
        if src == self.rank:
            parts.append(x)
        else:
            self.recv(buf, src)
            parts.append(buf)
    return torch.cat(parts, dim=0)


P2PDistributedImpl.all_gather = _all_gather
