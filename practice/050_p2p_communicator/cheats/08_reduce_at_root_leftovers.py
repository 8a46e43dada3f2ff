# 作弊：all_reduce 人人把 x 发给所有 rank，但只由 rank 0 收齐、加好再发回去；别的 rank 只收 rank 0 的那条
# 为什么必须判错：题目要求一次调用里发出去的消息都要在这次调用里收完；非 0 的 rank 之间互发的那些消息没人收，留在信箱里，下一次集合通信会把它们当成自己的数据收走，算出错的结果。
# 判词里要有：没人收｜超过了
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def _all_reduce(self, x):
    if self.world_size == 1:
        return x
    for dst in range(self.world_size):
        if dst != self.rank:
            self.send(x, dst)
    if self.rank == 0:
        total = x.clone()
        for src in range(1, self.world_size):
            buf = torch.empty_like(x)
            self.recv(buf, src)
            total += buf
        x.copy_(total)
        for dst in range(1, self.world_size):
            self.send(x, dst)
    else:
        self.recv(torch.empty_like(x), 0)  # rank 0 一开始发的 x，丢掉
        self.recv(x, 0)
    return x


P2PDistributedImpl.all_reduce = _all_reduce
