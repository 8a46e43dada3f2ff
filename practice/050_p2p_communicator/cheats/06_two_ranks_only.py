# 作弊：只考虑两个 rank：对面永远是 1 − rank，和它换一下 x 就完事
# 为什么必须判错：题目要求 world_size 是 1 到 6 的任意值；写死两个 rank，三个以上时 rank 2 的“对面”是 −1（发不出去），别的 rank 也只加了一个邻居的部分和。
# 判词里要有：dst｜src｜不是各 rank｜不对
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def _all_reduce(self, x):
    if self.world_size == 1:
        return x
    other = 1 - self.rank
    buf = torch.empty_like(x)
    self.send(x, other)
    self.recv(buf, other)
    total = buf + x if self.rank == 1 else x + buf
    x.copy_(total)
    return x


def _all_gather(self, x):
    if self.world_size == 1:
        return x.clone()
    other = 1 - self.rank
    buf = torch.empty_like(x)
    self.send(x, other)
    self.recv(buf, other)
    return torch.cat([x, buf] if self.rank == 0 else [buf, x])


P2PDistributedImpl.all_reduce = _all_reduce
P2PDistributedImpl.all_gather = _all_gather
