# 作弊：CPU 实现把 d 用 repeat 展开到 [N, K]（第 j 个数用了 d[:, j % (K/32)]）
# 为什么必须判错：题目要求第 g 组的 32 个权重乘 d[n, g]；repeat 把整行的缩放重复 32 遍，K > 32 时几乎每个权重的缩放都错了，只有 K = 32 的层碰巧对。
# 判词里要有：数值不对
# 写法：接在这道题的 solution.py 后面（其余和参考答案一样）


def linear_int8_cpu(x, q, d):
    return x @ (q.float() * d.repeat(1, GROUP)).T
