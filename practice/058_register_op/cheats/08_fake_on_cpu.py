# 作弊：假实现用 torch.empty(M, N) 造输出，不管 x 在哪个 device 上
# 为什么必须判错：题目要求输出和 x 在同一个 device 上：meta 张量（或 GPU 上的 FakeTensor）进来，假实现却说输出在 CPU 上，编译器按错的 device 安排后面的运算。
# 判词里要有：device
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def linear_int8_fake(x, q, d):
    return torch.empty(x.shape[0], q.shape[0])
